"""Slack's cursor-paged lists through slack_sdk's own paging, against the fake Web API: every
page is read up to the bound, each page asks with the previous page's cursor, and a list
longer than the bound is reported incomplete rather than taken for the whole."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.context import LIST_PAGES, ThreadReader, paged
from tests.fakes import slack as fs
from tests.fakes.slack import FakeSlack

pytestmark = pytest.mark.network


def reader(fake: FakeSlack) -> ThreadReader:
    return ThreadReader(client=AsyncWebClient(token=fake.bot_token, base_url=fake.api_url))


async def test_members_are_read_page_by_page_with_each_cursor() -> None:
    async with FakeSlack() as fake:
        fake.page_size = 2
        people = ["U1", "U2", "U3", "U4", fs.BOT_USER]
        fake.members["CSMALL"] = people
        info = await reader(fake).channel_info("CSMALL", fs.BOT_USER)
        cursors = [call.body.get("cursor") for call in fake.method_calls("conversations.members")]
    assert info.members == frozenset(people) and info.complete and info.with_parley
    assert cursors == [None, "2", "4"]  # the first page asks without one


async def test_a_list_longer_than_the_bound_is_incomplete_and_costs_the_bound() -> None:
    async with FakeSlack() as fake:
        fake.page_size = 2
        fake.members["CBIG"] = [f"U{n}" for n in range(2 * LIST_PAGES + 1)]
        info = await reader(fake).channel_info("CBIG", fs.BOT_USER)
        calls = fake.method_calls("conversations.members")
    assert not info.complete and len(info.members) == 2 * LIST_PAGES
    assert len(calls) == LIST_PAGES


async def test_history_pages_stop_at_the_bound_and_an_error_page_raises() -> None:
    async with FakeSlack() as fake:
        fake.page_size = 3
        root = "1700000000.000000"
        fake.thread("CGEN", root, *((f"U{n}", f"m{n}") for n in range(20)))
        client = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
        got = [
            m
            async for m in paged(
                client.conversations_replies, "messages", 2, channel="CGEN", ts=root
            )
        ]
        assert len(got) == 6 and len(fake.method_calls("conversations.replies")) == 2
        with pytest.raises(SlackApiError):
            [
                m
                async for m in paged(
                    client.conversations_replies, "messages", 2, channel="CNONE", ts=root
                )
            ]
