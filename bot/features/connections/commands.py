"""/connections: the accounts a person connected for per-user MCP servers, each with a
**Disconnect** button, and their standing approvals ("Always for this tool"), each with a
**Revoke** button. Shown to that person alone; a press disconnects or revokes the presser's
own only, whoever's list it was."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from adapters.base import (
    Actor,
    Button,
    ConversationKey,
    HandoverFailed,
    InboundAction,
    InboundMessage,
    OutboundMessage,
)
from bot.conversation import effects as fx
from bot.conversation.seam import Acting, Handler
from bot.conversation.texts import (
    CODE_REFUSED,
    CONNECTED_BY_CODE,
    CONNECTED_LATER,
    DISCONNECTED,
    NONE_CONFIGURED,
    NONE_CONNECTED,
    NOT_CONNECTED,
    NOT_HELD,
    NOT_KNOWN,
    REVOKED,
    STANDING_HEAD,
)
from bot.features.schedules.store import chat_of
from bot.runtime.keys import connected_event

if TYPE_CHECKING:
    from bot.features.connections.store import Connections
    from bot.features.standing import Standing, StandingStore

log = logging.getLogger(__name__)

CONNECTION_ACTION = "conn"  # the decision id Disconnect buttons carry; the value is the server
STANDING_ACTION = "stand"  # the decision id Revoke buttons carry; the value is the approval's id


class ConnectionCommands:
    """/connections, its buttons and a typed sign-in code: a feature of the executor."""

    def __init__(
        self, connections: Connections | None, standing: StandingStore | None = None
    ) -> None:
        self.connections = connections
        self.standing = standing

    def handlers(self) -> Mapping[type, Handler]:
        return {
            fx.ListConnections: self._list,
            fx.ConnectionButton: self._pressed,
            fx.ConfirmConnection: self._confirm,
        }

    async def _list(self, acting: Acting, effect: fx.ListConnections) -> None:
        assert isinstance(acting.event, InboundMessage)
        for number, message in enumerate(await self.listing(acting.event)):
            await acting.reply.send(message, "reply" if number == 0 else f"reply-{number}")

    async def _pressed(self, acting: Acting, effect: fx.ConnectionButton) -> None:
        assert isinstance(acting.event, InboundAction)
        await acting.notify(await self.press(acting.event), True)

    async def _confirm(self, acting: Acting, effect: fx.ConfirmConnection) -> fx.Event | None:
        """A typed sign-in code: the account becomes the sender's and the conversation where
        they asked hears it was connected (a `connected` event); or they are told why not."""
        event = acting.event
        assert isinstance(event, InboundMessage)
        found = await self.confirm(event, effect.code)
        if found is None:
            return fx.NotACode(received=acting.received)
        said, connected = found
        if connected is not None:
            try:
                handed = acting.forward is not None and await acting.forward(connected)
            except HandoverFailed:
                handed = False
            if handed:
                return None  # the conversation it resumes speaks for it
            log.warning("a confirmed sign-in could not resume %s", connected.conversation.id)
        private = OutboundMessage(text=said, private_to=event.actor.user_id)
        await acting.reply.send(private, "reply")
        return None

    async def listing(self, event: InboundMessage) -> list[OutboundMessage]:
        """The person's accounts, then their standing approvals: a message each, since one
        message carries one kind of button."""
        person = event.actor.user_id
        platform = event.conversation.platform
        if self.connections is None:
            accounts = OutboundMessage(text=NONE_CONFIGURED, private_to=person)
        elif servers := await self.connections.connected(platform, person):
            lines = ["Accounts you connected (I use them only for your own requests):"]
            lines += [f"• {server}" for server in servers]
            accounts = OutboundMessage(
                text="\n".join(lines),
                buttons=tuple(Button(label=f"Disconnect {s}", value=s) for s in servers),
                decision_id=CONNECTION_ACTION,
                private_to=person,
            )
        else:
            accounts = OutboundMessage(text=NONE_CONNECTED, private_to=person)
        approvals = await self.standing.of(platform, person) if self.standing else []
        if not approvals:
            return [accounts]
        here = chat_of(event.conversation.id)
        lines = [STANDING_HEAD, *(f"• {_described(found, here)}" for found in approvals)]
        standing = OutboundMessage(
            text="\n".join(lines),
            buttons=tuple(Button(label=f"Revoke {s.tool}", value=s.id) for s in approvals),
            decision_id=STANDING_ACTION,
            private_to=person,
        )
        if self.connections is None:  # nothing about accounts to say
            return [standing]
        return [accounts, standing]

    async def confirm(
        self, event: InboundMessage, code: str
    ) -> tuple[str, InboundMessage | None] | None:
        """A typed sign-in code: what to tell the sender, and the `connected` event for the
        conversation where they asked when it confirmed their sign-in; None when no sign-in
        of theirs waits (the message is just a message)."""
        if self.connections is None:
            return None
        platform, person = event.conversation.platform, event.actor.user_id
        found = await self.connections.confirm(
            platform, person, event.conversation.id, event.is_direct, code
        )
        if found is None:
            return None
        held = found.held
        if held is None:
            return CODE_REFUSED[found.refusal or "wrong"], None
        there = ConversationKey.parse(held.conversation_id)
        connected = InboundMessage(
            event_id=connected_event(held.question_id),
            conversation=there,
            actor=Actor(
                platform=platform, user_id=person, name=held.user_name, team_id=held.team_id
            ),
            text=CONNECTED_BY_CODE.format(server=held.server),
            is_direct=held.is_direct,
            kind="connected",
            args=held.question_id,
        )
        return CONNECTED_LATER, connected

    async def press(self, action: InboundAction) -> str:
        if action.decision_id == STANDING_ACTION:
            return await self._revoke(action)
        server = action.choice
        if self.connections is None or server not in self.connections.servers:
            return NOT_KNOWN
        platform = action.conversation.platform
        person = action.actor.user_id
        if not await self.connections.disconnect(server, platform, person, revoke=True):
            return NOT_CONNECTED.format(server=server)
        return DISCONNECTED.format(server=server)

    async def _revoke(self, action: InboundAction) -> str:
        if self.standing is None:
            return NOT_HELD
        # the presser's own approvals only: someone else's id finds nothing there
        found = await self.standing.revoke(
            action.conversation.platform, action.actor.user_id, action.choice
        )
        return REVOKED.format(tool=found.tool) if found is not None else NOT_HELD


def _described(found: Standing, here: str) -> str:
    where = (
        "everywhere" if found.where == "*" else "here" if found.where == here else "in another chat"
    )
    until = time.strftime("%Y-%m-%d", time.gmtime(found.expires))
    return f"{found.tool} — {where}, until {until}"
