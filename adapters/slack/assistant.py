"""Slack's Agents & AI Apps surface, on Bolt's `AsyncAssistant` middleware.

A new assistant thread gets a greeting and suggested prompts; the first objective in it
becomes the thread's title; the channel the user is looking at (`assistant_thread_started`
and `assistant_thread_context_changed` carry it) is remembered per thread, and the adapter
passes it to the agent with the user's messages there. User messages in assistant threads
fall through to the adapter's ordinary message handling.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from slack_bolt.context.say.async_say import AsyncSay
from slack_bolt.context.set_suggested_prompts.async_set_suggested_prompts import (
    AsyncSetSuggestedPrompts,
)
from slack_bolt.middleware.assistant.async_assistant import AsyncAssistant
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

TITLE_CHARS = 60
TITLE_TIMEOUT = 1.0  # seconds a thread title may take: it is set before Slack's ack
MAX_THREADS = 10_000  # threads remembered per process; the oldest are forgotten first


@dataclass(kw_only=True)
class AssistantThreads:
    client: AsyncWebClient
    greeting: str
    prompts: tuple[str, ...]
    # (DM channel, thread_ts) -> the channel the user is looking at
    looking_at: dict[tuple[str, str], str] = field(default_factory=dict)
    untitled: dict[tuple[str, str], None] = field(default_factory=dict)

    def middleware(self) -> AsyncAssistant:
        assistant = AsyncAssistant()
        assistant.thread_started(self._started)
        assistant.thread_context_changed(self._context_changed)
        return assistant

    async def _started(
        self,
        payload: dict[str, Any],
        say: AsyncSay,
        set_suggested_prompts: AsyncSetSuggestedPrompts,
    ) -> None:
        thread = self._remember(payload)
        if thread is not None:
            self.untitled[thread] = None
            _bound(self.untitled)
        if self.greeting:
            await say(self.greeting)
        if self.prompts:
            await set_suggested_prompts(prompts=list(self.prompts))

    async def _context_changed(self, payload: dict[str, Any]) -> None:
        self._remember(payload)

    def _remember(self, payload: dict[str, Any]) -> tuple[str, str] | None:
        info = payload.get("assistant_thread") or {}
        channel, thread_ts = info.get("channel_id"), info.get("thread_ts")
        if not channel or not thread_ts:
            return None
        thread = (str(channel), str(thread_ts))
        viewed = (info.get("context") or {}).get("channel_id")
        if viewed:
            self.looking_at[thread] = str(viewed)
            _bound(self.looking_at)
        return thread

    def saw_dm(self, channel: str, ts: str, thread: str | None) -> None:
        """Nothing to note: an assistant thread is already its own session."""

    def with_context(self, user: str, channel: str, thread_ts: str | None, text: str) -> str:
        """The message text, with the channel the user is looking at when Slack said so."""
        viewed = self.looking_at.get((channel, thread_ts)) if thread_ts else None
        if viewed is None:
            return text
        return f"{text}\n\n(I am looking at the channel <#{viewed}>.)"

    async def asked(self, channel: str, thread_ts: str | None, text: str) -> None:
        """Title a new thread after its first objective (once; a title is only a nicety)."""
        if thread_ts is None or (channel, thread_ts) not in self.untitled:
            return
        del self.untitled[(channel, thread_ts)]
        try:
            async with asyncio.timeout(TITLE_TIMEOUT):
                await self.client.assistant_threads_setTitle(
                    channel_id=channel, thread_ts=thread_ts, title=_title(text)
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("no thread title (%s)", type(exc).__name__)


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def _bound(threads: dict[Any, Any]) -> None:
    while len(threads) > MAX_THREADS:
        del threads[next(iter(threads))]
