"""What a Slack message brings besides its text: files, and the thread it was written in.

The gateway only records each file's `url_private` (Slack's ack must stay fast); a worker
downloads it with the bot token (`files:read`), and only from Slack's own hosts, so the token
never goes anywhere an event names. Thread history comes from `conversations.replies`,
bounded in pages; authors' display names come from `users.info`, cached and bounded per read
(the same cached record gives a run the person's time zone).
History reads honour Slack's rate limits (`limits.py`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.base import (
    Attachment,
    ChannelInfo,
    ChannelRefused,
    ContextMessage,
    DownloadError,
    FileTooLarge,
)
from adapters.slack.limits import HistoryLimits

log = logging.getLogger(__name__)

SLACK_FILE_HOSTS = ("slack.com", "slack-edge.com", "slack-files.com")
DOWNLOAD_TIMEOUT = 60.0
HISTORY_PAGES = 5  # of up to 200 messages each
LIST_PAGES = 10  # of channels or members, 200 each
# Slack ids are upper case, channel names lower case: a bare upper-case word is an id.
CHANNEL_ID = re.compile(r"^<#([CG][A-Z0-9]+)(?:\|[^>]*)?>$|^([CGD][A-Z0-9]{2,})$")
NAME_SECONDS = 3600.0
NAMES_KEPT = 5000
# users.info calls one read may make (a long thread has as many authors as messages); the
# newest messages are named first, older authors past it are shown by id
NAME_LOOKUPS = 25
SKIPPED_SUBTYPES = {"channel_join", "channel_leave", "group_join", "group_leave"}
CLIPS = ("slack_audio", "slack_video")  # audio and video clips recorded in Slack
MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")


def files_of(event: dict[str, Any]) -> tuple[Attachment, ...]:
    """The files shared with a message, by reference; files Slack withheld are left out."""
    found = []
    for item in event.get("files") or ():
        if not isinstance(item, dict):
            continue
        url = item.get("url_private_download") or item.get("url_private")
        if not isinstance(url, str) or not url:
            continue  # a tombstone, or hidden by the workspace's plan
        size = item.get("size")
        mime = str(item.get("mimetype") or "")
        duration = item.get("duration_ms")
        found.append(
            Attachment(
                ref=url,
                name=str(item.get("name") or item.get("title") or "file"),
                mime_type=mime,
                size=size if isinstance(size, int) else None,
                speech=mime.startswith(("audio/", "video/")) or item.get("subtype") in CLIPS,
                duration=duration / 1000 if isinstance(duration, int | float) else None,
            )
        )
    return tuple(found)


def may_receive_token(url: str, api_url: str) -> bool:
    """Whether a file URL is on Slack's hosts over HTTPS, or at the configured API's own
    scheme, host and port (a local Slack, e.g. a test's): never plain HTTP elsewhere."""
    target, api = urlsplit(url), urlsplit(api_url)
    host = (target.hostname or "").lower()
    if not host:
        return False
    try:
        same_origin = (target.scheme, host, target.port) == (
            api.scheme,
            (api.hostname or "").lower(),
            api.port,
        )
    except ValueError:  # a port that is not a number
        return False
    if same_origin and target.scheme in ("https", "http"):
        return True
    return target.scheme == "https" and any(
        host == h or host.endswith("." + h) for h in SLACK_FILE_HOSTS
    )


async def download(token: str, api_url: str, attachment: Attachment, limit: int) -> bytes:
    """The file's bytes; FileTooLarge past `limit`, DownloadError when Slack won't give it."""
    if not may_receive_token(attachment.ref, api_url):
        raise DownloadError("file URL is not on a Slack host")
    timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT)
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(attachment.ref, headers=headers) as response,
        ):
            if response.status != 200:
                raise DownloadError(f"Slack answered HTTP {response.status}")
            wanted = attachment.mime_type
            if response.content_type == "text/html" and wanted != "text/html":
                # Slack's sign-in page: the token lacks files:read or the file is not shared
                raise DownloadError("Slack sent a web page instead of the file")
            if response.content_length is not None and response.content_length > limit:
                raise FileTooLarge(response.content_length, limit)
            data = bytearray()
            async for chunk in response.content.iter_chunked(64 * 1024):
                data += chunk
                if len(data) > limit:
                    raise FileTooLarge(None, limit)
            return bytes(data)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise DownloadError(f"Slack download failed ({type(exc).__name__})") from exc


async def respond(
    url: str, api_url: str, text: str, blocks: Any, *, replace_original: bool = False
) -> bool:
    """A private answer through an event's response_url, which reaches the person even in a
    channel Parley is not in; with `replace_original`, it replaces the message a press was
    made on (an ephemeral one cannot be edited any other way). False if the URL is not
    Slack's or Slack refused it."""
    if not may_receive_token(url, api_url):
        return False
    try:
        response = await AsyncWebhookClient(url).send(
            text=text,
            blocks=blocks,
            response_type="ephemeral",
            replace_original=replace_original or None,
        )
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("a response_url answer failed (%s)", type(exc).__name__)
        return False
    if response.status_code != 200:
        log.info("Slack refused a response_url answer (HTTP %s)", response.status_code)
    return response.status_code == 200


def display_name(info: dict[str, Any]) -> str:
    """The name Slack shows for a `users.info` record ("" when it has none)."""
    profile = info.get("profile") or {}
    return str(profile.get("display_name") or profile.get("real_name") or info.get("name") or "")


@dataclass(kw_only=True)
class ThreadReader:
    """Earlier messages of a thread, with display names resolved once and cached."""

    client: AsyncWebClient
    reads: AsyncWebClient | None = None  # for history reads: no rate-limit retry (limits.py)
    limits: HistoryLimits = field(default_factory=HistoryLimits)
    _users: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)

    async def _read(self, method: str, key: str, **params: Any) -> list[Any]:
        """The items under `key` of a history method's first pages, within its rate limit."""
        call = getattr(self.reads or self.client, method.replace(".", "_"))

        async def fetch() -> list[Any]:
            return [m async for m in paged(call, key, HISTORY_PAGES, **params)]

        return await self.limits.read(method, fetch)

    async def history(
        self,
        channel: str,
        thread_ts: str,
        before: str,
        bot_user_id: str | None,
        *,
        after: str | None = None,
    ) -> list[ContextMessage]:
        """The thread's messages between `after` (when given) and `before`, both excluded."""
        read = await self._read(
            "conversations.replies", "messages", channel=channel, ts=thread_ts, oldest=after
        )
        raw = [m for m in read if isinstance(m, dict)]
        found = []
        lookups = _Lookups()
        for message in reversed(raw):  # the newest first: they are the ones kept
            ts = str(message.get("ts") or "")
            if not ts or _ts(ts) >= _ts(before) or message.get("subtype") in SKIPPED_SUBTYPES:
                continue
            if after and _ts(ts) <= _ts(after):
                continue  # Slack lists the thread's first message whatever `oldest` says
            found.append((ts, await self._render(message, bot_user_id, lookups)))
        found.sort(key=lambda item: _ts(item[0]))
        return [message for _, message in found if message.text or message.author]

    async def channel_info(self, channel: str, bot_user_id: str | None) -> ChannelInfo:
        """Who is in a channel (named by id, mention or #name), and which team hosts it."""
        try:
            channel_id = await self._channel_id(channel)
            members, complete = await self._members(channel_id)
            info = (await self.client.conversations_info(channel=channel_id)).get("channel") or {}
        except SlackApiError as exc:
            error = exc.response.get("error")
            raise ChannelRefused(f"Slack would not let Parley read {channel} ({error}).") from exc
        teams = {str(t) for t in info.get("shared_team_ids") or ()}
        teams |= {str(info[k]) for k in ("context_team_id", "conversation_host_id") if info.get(k)}
        return ChannelInfo(
            id=channel_id,
            members=frozenset(members),
            complete=complete,
            with_parley=bool(bot_user_id) and bot_user_id in members,
            teams=frozenset(teams),
            enterprises=frozenset(
                {str(info["enterprise_id"])} if info.get("enterprise_id") else ()
            ),
        )

    async def channel_history(
        self, channel_id: str, oldest: float, bot_user_id: str | None
    ) -> list[ContextMessage]:
        """A channel's top-level messages since `oldest`, oldest first."""
        try:
            read = await self._read(
                "conversations.history", "messages", channel=channel_id, oldest=f"{oldest:.6f}"
            )
            raw = [m for m in read if isinstance(m, dict)]
        except SlackApiError as exc:
            error = exc.response.get("error")
            raise ChannelRefused(f"Slack would not let Parley read it ({error}).") from exc
        found = []
        lookups = _Lookups()
        for message in sorted(raw, key=lambda m: _ts(str(m.get("ts") or "")), reverse=True):
            ts = str(message.get("ts") or "")
            if not ts or message.get("subtype") in SKIPPED_SUBTYPES:
                continue
            rendered = await self._render(message, bot_user_id, lookups)
            found.append(
                ContextMessage(
                    author=rendered.author,
                    text=rendered.text,
                    from_bot=rendered.from_bot,
                    at=float(ts),
                )
            )
        found.sort(key=lambda m: m.at or 0.0)
        return found

    async def _channel_id(self, channel: str) -> str:
        match = CHANNEL_ID.match(channel.strip())
        if match:
            return match.group(1) or match.group(2)
        name = channel.strip().lstrip("#").lower()
        async for item in paged(
            self.client.conversations_list,
            "channels",
            LIST_PAGES,
            types="public_channel,private_channel",
            exclude_archived=True,
        ):
            if isinstance(item, dict) and str(item.get("name") or "").lower() == name:
                return str(item["id"])
        raise ChannelRefused(f"There is no channel {channel} that Parley is in.")

    async def _members(self, channel_id: str) -> tuple[set[str], bool]:
        """The channel's members, and whether that is all of them (at most LIST_PAGES pages)."""
        members: set[str] = set()
        last: AsyncSlackResponse | None = None
        async for last in pages(self.client.conversations_members, LIST_PAGES, channel=channel_id):
            members.update(str(m) for m in last.get("members") or [])
        more = last is not None and (last.get("response_metadata") or {}).get("next_cursor")
        return members, not more

    async def _render(
        self, message: dict[str, Any], bot_user_id: str | None, lookups: _Lookups
    ) -> ContextMessage:
        user = message.get("user")
        own = bool(bot_user_id) and user == bot_user_id
        if own:
            author = "Parley"
        elif isinstance(user, str) and user:
            author = await self.name(user, lookups)
        else:
            profile = message.get("bot_profile") or {}
            author = str(message.get("username") or profile.get("name") or "a bot")
        text = str(message.get("text") or "")
        for mentioned in set(MENTION.findall(text)):
            name = "Parley" if mentioned == bot_user_id else await self.name(mentioned, lookups)
            text = re.sub(rf"<@{mentioned}(?:\|[^>]*)?>", f"@{name}", text)
        names = [
            str(f.get("name") or "file") for f in message.get("files") or () if isinstance(f, dict)
        ]
        if names:
            text = (text + "\n" if text else "") + "[shared: " + ", ".join(names) + "]"
        return ContextMessage(author=author, text=text.strip(), from_bot=own)

    async def name(self, user: str, lookups: _Lookups | None = None) -> str:
        """The user's display name: cached, else asked of Slack while `lookups` lasts."""
        lookups = lookups or _Lookups()
        if user in lookups.failed or (lookups.left <= 0 and not self._cached(user)):
            return user
        if not self._cached(user):
            lookups.left -= 1
        try:
            info = await self.user(user)
        except SlackApiError as exc:
            log.info("no name for a user: %s", exc.response.get("error"))
            lookups.failed.add(user)
            return user
        return display_name(info) or user

    async def about(self, user: str) -> dict[str, Any]:
        """The person's `users.info` record, {} when Slack refuses or does not answer within
        two seconds (a run then goes on without their time zone and name)."""
        try:
            async with asyncio.timeout(2.0):
                return await self.user(user)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("no users.info record for a user (%s)", type(exc).__name__)
            return {}

    async def user(self, user: str) -> dict[str, Any]:
        """Slack's `users.info` record of a user, cached for NAME_SECONDS: one call serves
        the name in a thread and the time zone of a run (SlackApiError when Slack refuses)."""
        cached = self._users.get(user)
        if cached is not None and self._cached(user):
            return cached[1]
        response = await self.client.users_info(user=user)
        info = response.get("user") or {}
        if len(self._users) >= NAMES_KEPT:
            self._users.clear()
        self._users[user] = (time.monotonic(), info)
        return info

    async def left(self, user: str) -> bool:
        """Whether Slack says the person is gone (deactivated, or no such user); not when
        Slack merely does not answer within two seconds."""
        try:
            async with asyncio.timeout(2.0):
                return bool((await self.user(user)).get("deleted"))
        except SlackApiError as exc:
            return exc.response.get("error") == "user_not_found"
        except (aiohttp.ClientError, TimeoutError):
            return False

    def _cached(self, user: str) -> bool:
        cached = self._users.get(user)
        return cached is not None and time.monotonic() - cached[0] < NAME_SECONDS


@dataclass(kw_only=True)
class _Lookups:
    """What is left of one read's users.info calls, and who could not be named."""

    left: int = NAME_LOOKUPS
    failed: set[str] = field(default_factory=set)


async def pages(
    call: Callable[..., Awaitable[AsyncSlackResponse]], most: int, **params: Any
) -> AsyncIterator[AsyncSlackResponse]:
    """The first `most` pages of a cursor-paged Slack method, 200 items a page; slack_sdk's
    response follows `next_cursor` as it is iterated."""
    read = 0
    async for page in await call(**params, limit=200):
        yield page
        read += 1
        if read == most:
            return


async def paged(
    call: Callable[..., Awaitable[AsyncSlackResponse]], key: str, most: int, **params: Any
) -> AsyncIterator[Any]:
    """The items under `key` of the first `most` pages of a cursor-paged Slack method."""
    async for page in pages(call, most, **params):
        for item in page.get(key) or []:
            yield item


def _ts(value: str) -> tuple[int, int]:
    seconds, _, micros = value.partition(".")
    try:
        return int(seconds), int(micros or 0)
    except ValueError:
        return 0, 0
