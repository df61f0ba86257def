"""Slack events, button presses and /parley as neutral events (Bolt listeners).

A DM, a mention, or a reply in a thread (Parley's only if the thread is already its
conversation) becomes an `InboundMessage`; what the adapter saw is its `kind`: a mention with
nothing else is `bare_mention`, a file Slack withheld with no comment `non_text`, a message
over the limit `too_long` (cut to the limit). The conversation engine decides what to say;
this module says nothing. Bots, Slackbot, edits, joins and events with mistyped fields are no
events; outside the allowed teams and channels Parley does not listen at all. A person's team
is their own (Bolt's actor team), not the workspace the event came through: in a Slack
Connect channel, someone from another organisation is checked and scoped as a member of it;
through an org-wide install, the workspace the event names (`teams.py`). Every event not
answered is logged once with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import (
    Actor,
    ConversationKey,
    HandoverFailed,
    Inbound,
    InboundAction,
    InboundKind,
    InboundMessage,
    MessageRef,
)
from adapters.slack.config import SlackConfig
from adapters.slack.context import files_of
from adapters.slack.teams import Person, Skips, person_of
from adapters.slack.traits import action_event, command_event, event_id

log = logging.getLogger(__name__)

# Message subtypes a person writes; every other subtype (bot posts, edits, joins, topic
# changes, …) is ignored. A thread reply also sent to the channel is still a thread reply.
USER_SUBTYPES = {None, "file_share", "thread_broadcast", "me_message"}
SLACKBOT = "USLACKBOT"  # Slack's own notices in a DM ("You have been removed from #…")
GROUP_LOOKUP_TIMEOUT = 1.0  # seconds
PRESS_NOT_TAKEN = "I couldn't take that press just now — please press the button again in a minute."
PRESS_NOTE_TIMEOUT = 0.8  # seconds: said before the answer, still inside Slack's 3 s
GROUP_CACHE_SECONDS = 300.0


class DirectMessages(Protocol):
    """The surface a DM arrives on: Slack's agent messaging, or the older assistant threads."""

    def saw_dm(self, channel: str, ts: str, thread: str | None) -> None: ...

    def with_context(self, user: str, channel: str, thread: str | None, text: str) -> str:
        """The message text, with what the user is looking at when Slack said so."""
        ...

    async def asked(self, channel: str, thread: str | None, text: str) -> None:
        """After the message is stored: the surface may title the thread (bounded)."""
        ...


@dataclass(kw_only=True)
class SlackInbound:
    config: SlackConfig
    client: AsyncWebClient
    bot_user_id: Callable[[], str | None]  # known once auth.test has answered
    accepting: Callable[[], bool]  # whether anything takes events (a handler is set)
    hand_over: Callable[[Inbound], Awaitable[None]]
    direct: DirectMessages
    # DM channel -> the ts of the latest message there: where the assistant status shows
    dm_threads: dict[str, str] = field(default_factory=dict, init=False)
    _groups: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict, init=False)
    skipped: Skips = field(default_factory=Skips, init=False)

    def register(self, app: AsyncApp) -> None:
        app.event("message")(self._on_message_event)
        app.event("app_mention")(self._on_mention)
        app.action(re.compile(r"^parley:"))(self._on_action)
        app.command("/parley")(self._on_command)
        # Other events and commands are acknowledged and dropped, not left to Bolt's 404
        # (which Slack retries) and its "unhandled request" warning with the payload.
        anything = re.compile(r".*")
        app.event(anything)(self._ignore_event)
        app.action(anything)(self._ignore)
        app.command(anything)(self._ignore)

    async def _on_message_event(
        self, event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        if not _well_typed(event, body):
            self.skipped(body, "mistyped fields")
            return
        if event.get("subtype") not in USER_SUBTYPES or event.get("bot_id"):
            self.skipped(
                body, f"not a person's message ({event.get('subtype') or 'bot'})", quiet=True
            )
            return
        text = event.get("text") or ""
        bot_user_id = self.bot_user_id()
        mention = f"<@{bot_user_id}>" if bot_user_id else None
        person = person_of(body, event, context)
        if event.get("channel_type") == "im":
            await self._message(event, body, person, direct=True, mentioned=True)
        elif event.get("thread_ts") and not (mention and mention in text):
            # A reply in a thread: Parley's only if the thread is already its conversation.
            await self._message(event, body, person, direct=False, mentioned=False)
        else:
            self.skipped(body, "channel chatter (a mention comes as app_mention)", quiet=True)

    async def _on_mention(
        self, event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        if not _well_typed(event, body):
            self.skipped(body, "mistyped fields")
            return
        if event.get("bot_id"):
            self.skipped(body, "a bot's mention")
            return
        person = person_of(body, event, context)
        await self._message(event, body, person, direct=False, mentioned=True)

    async def _ignore_event(self, body: dict[str, Any]) -> None:
        """Events Parley does not act on (reactions, joins, app home, …): acknowledged only."""
        self.skipped(body, "an event Parley does not act on", quiet=True)

    async def _ignore(self, ack: Any) -> None:
        await ack()

    async def _message(
        self,
        event: dict[str, Any],
        body: dict[str, Any],
        person: Person,
        *,
        direct: bool,
        mentioned: bool,
    ) -> None:
        """`person`: the author's own team (in a Slack Connect channel their organisation's,
        not the host's; None when Slack does not say) and enterprise."""
        user = event.get("user")
        channel = event.get("channel")
        if not user or user in (self.bot_user_id(), SLACKBOT):
            self.skipped(body, "no person behind it (Parley itself or Slackbot)")
            return
        if not channel or not event.get("ts"):
            self.skipped(body, "no channel or ts to answer into")
            return
        team = body.get("team_id") or event.get("team")  # the workspace the chat lives in
        if not self.config.admits(person.team, channel, person.enterprise):
            self.skipped(
                body,
                f"not on the allowlists (team {person.team or 'unknown'}, enterprise "
                f"{person.enterprise or 'none'}, channel {channel})",
            )
            return
        ts = event["ts"]
        thread = event.get("thread_ts") or (None if direct else ts)
        text = self._strip_mention(event.get("text") or "").strip()
        files = files_of(event)
        kind: InboundKind = "text"
        if not text and not files:
            if not mentioned:
                self.skipped(body, "an empty thread reply", quiet=True)
                return  # an empty reply in a thread that may not be Parley's
            # a file Slack withheld (no comment), or a bare mention of Parley
            kind = "non_text" if event.get("files") else "bare_mention"
        length = len(text)
        limit = self.config.max_message_chars
        if length > limit:
            kind, text = "too_long", text[:limit]
        if not self.accepting():
            self.skipped(body, "nothing takes events yet (starting or stopping)")
            return
        asked = text
        if direct:  # where the status shows; what the user is looking at, if Slack said
            self.dm_threads[channel] = thread or ts
            self.direct.saw_dm(channel, ts, thread)
            if kind == "text":
                text = self.direct.with_context(user, channel, thread, text)
        await self.hand_over(
            InboundMessage(
                event_id=event_id(body.get("event_id") or ts),
                conversation=ConversationKey(
                    platform="slack", chat_id=channel, thread_id=thread, team_id=team
                ),
                actor=Actor(
                    platform="slack",
                    user_id=user,
                    team_id=person.team,
                    enterprise_id=person.enterprise,
                ),
                text=text,
                is_direct=direct,
                message_id=ts,
                mentioned=mentioned,
                attachments=files,
                kind=kind,
                length=length,
            )
        )
        if direct and kind == "text":
            await self.direct.asked(channel, thread, asked)

    def _strip_mention(self, text: str) -> str:
        bot_user_id = self.bot_user_id()
        return text.replace(f"<@{bot_user_id}>", "") if bot_user_id else text

    async def _on_action(self, ack: Any, body: dict[str, Any]) -> None:
        await ack()
        if not _well_typed_action(body):
            return
        action = (body.get("actions") or [{}])[0]
        decision_id, _, choice = str(action.get("value") or "").rpartition(":")
        user = str((body.get("user") or {}).get("id") or "")
        team = (body.get("team") or {}).get("id") or (body.get("user") or {}).get("team_id")
        person_team = (body.get("user") or {}).get("team_id") or team
        enterprise = _enterprise_of(body)
        channel = str((body.get("channel") or {}).get("id") or "")
        # a press on an ephemeral message comes without the message: its container names it
        container = body.get("container") or {}
        message = body.get("message") or {
            "ts": container.get("message_ts"),
            "thread_ts": container.get("thread_ts"),
        }
        if (
            not decision_id
            or not user
            or not channel
            or not self.config.admits(person_team, channel, enterprise)
        ):
            log.info("slack button press not taken: not Parley's or not on the allowlists")
            return
        direct = channel.startswith("D")
        thread = message.get("thread_ts") or (None if direct else message.get("ts"))
        conversation = ConversationKey(
            platform="slack", chat_id=channel, thread_id=thread, team_id=team
        )
        if not self.accepting():
            return
        press = InboundAction(
            event_id=action_event(action.get("action_ts"), user),
            conversation=conversation,
            actor=Actor(
                platform="slack",
                user_id=user,
                team_id=person_team,
                enterprise_id=enterprise,
                groups=await self._groups_of(user),
            ),
            decision_id=decision_id,
            choice=choice,
            message=MessageRef(conversation=conversation, message_id=str(message.get("ts"))),
            is_direct=direct,
            reply_url=url if isinstance(url := body.get("response_url"), str) and url else None,
        )
        try:
            await self.hand_over(press)
        except HandoverFailed:
            # Slack never sends a button press again: tell the presser, then answer 503.
            # The one sentence an adapter says itself: nothing behind it can take the press.
            await self._press_not_taken(conversation, user)
            raise

    async def _press_not_taken(self, conversation: ConversationKey, user: str) -> None:
        try:
            async with asyncio.timeout(PRESS_NOTE_TIMEOUT):
                await self.client.chat_postEphemeral(
                    channel=conversation.chat_id,
                    user=user,
                    thread_ts=conversation.thread_id,
                    text=PRESS_NOT_TAKEN,
                )
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
            log.info("could not tell a presser to press again (%s)", type(exc).__name__)

    async def _groups_of(self, user: str) -> tuple[str, ...]:
        """Which of the approver user groups the user belongs to (cached briefly)."""
        found = []
        now = time.monotonic()
        for group in self.config.approver_groups:
            cached = self._groups.get(group)
            if cached is None or now - cached[0] > GROUP_CACHE_SECONDS:
                try:
                    # before the ack: bounded, and a failure only means "not an approver"
                    async with asyncio.timeout(GROUP_LOOKUP_TIMEOUT):
                        response = await self.client.usergroups_users_list(usergroup=group)
                    members = frozenset(str(u) for u in response.get("users") or [])
                except (SlackApiError, aiohttp.ClientError, TimeoutError) as exc:
                    log.warning("cannot read user group %s (%s)", group, type(exc).__name__)
                    members = frozenset()
                cached = (now, members)
                self._groups[group] = cached
            if user in cached[1]:
                found.append(group)
        return tuple(found)

    async def _on_command(self, ack: Any, command: dict[str, Any]) -> None:
        await ack()
        fields = ("channel_id", "team_id", "enterprise_id", "user_id", "text", "trigger_id")
        if not _strings(command, *fields, "response_url"):
            log.warning("ignored a /parley command with mistyped fields")
            return
        channel = str(command.get("channel_id") or "")
        team = command.get("team_id")
        enterprise = command.get("enterprise_id") or None
        if not self.config.admits(team, channel, enterprise):
            self.skipped(command, f"not on the allowlists (team {team}, channel {channel})")
            return
        if not self.accepting():
            self.skipped(command, "nothing takes events yet (starting or stopping)")
            return
        name, _, args = str(command.get("text") or "").strip().partition(" ")
        await self.hand_over(
            InboundMessage(
                event_id=command_event(command.get("trigger_id")),
                conversation=ConversationKey(platform="slack", chat_id=channel, team_id=team),
                actor=Actor(
                    platform="slack",
                    user_id=str(command.get("user_id")),
                    team_id=team,
                    enterprise_id=enterprise,
                ),
                text=str(command.get("text") or ""),
                is_direct=channel.startswith("D"),
                command=(name or "help").lower(),
                args=args.strip(),
                reply_url=command.get("response_url") or None,
            )
        )


def _enterprise_of(body: dict[str, Any]) -> str | None:
    """A button press's organisation: the presser's `enterprise_id`, else `enterprise.id` when
    they are of the workspace the press came through (a Slack Connect guest's is not the
    host's organisation)."""
    user = body.get("user") or {}
    found = user.get("enterprise_id")
    host = (body.get("team") or {}).get("id")
    if not found and (not host or user.get("team_id") in (None, host)):
        found = (body.get("enterprise") or {}).get("id")
    return found if isinstance(found, str) and found else None


def _strings(data: object, *names: str) -> bool:
    """Whether each named field is absent, null or a string."""
    if not isinstance(data, dict):
        return False
    return all(isinstance(data.get(name), str | None) for name in names)


def _well_typed(event: dict[str, Any], body: dict[str, Any]) -> bool:
    """Whether a message event's fields have the types Slack documents.

    Anything else is not from Slack as documented and would break code further on, so it is
    dropped here with a warning that names the fields (never their content).
    """
    event_fields = ("user", "channel", "ts", "thread_ts", "text", "team", "subtype")
    bad = [name for name in event_fields if not _strings(event, name)]
    bad += [f"body.{name}" for name in ("team_id", "event_id") if not _strings(body, name)]
    if event.get("channel_type") is not None and not isinstance(event["channel_type"], str):
        bad.append("channel_type")
    if bad:
        log.warning("ignored a Slack event with mistyped fields: %s", ", ".join(bad))
    return not bad


def _well_typed_action(body: dict[str, Any]) -> bool:
    actions = body.get("actions")
    ok = (
        isinstance(actions, list)
        and bool(actions)
        and _strings(actions[0], "value", "action_ts")
        and all(_strings(body.get(part) or {}, "id", "team_id") for part in ("user", "channel"))
        and _strings(body.get("team") or {}, "id")
        and _strings(body.get("enterprise") or {}, "id")
        and _strings(body.get("user") or {}, "enterprise_id")
        and _strings(body.get("message") or {}, "ts", "thread_ts")
        and isinstance(body.get("container") or {}, dict)
        and _strings(body.get("container") or {}, "message_ts", "thread_ts")
    )
    if not ok:
        log.warning("ignored a Slack button press with mistyped fields")
    return ok
