"""/connections: the accounts a person connected for per-user MCP servers, each with a
**Disconnect** button. Shown to that person alone; a press disconnects the presser's own
account only, whoever's list it was."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.base import Button, InboundAction, InboundMessage, OutboundMessage

if TYPE_CHECKING:
    from bot.runtime.connections import Connections

CONNECTION_ACTION = "conn"  # the decision id Disconnect buttons carry; the value is the server
NONE_CONFIGURED = "No tool here needs your own account."
NONE_CONNECTED = "You haven't connected any accounts. I'll ask when a tool needs one."


class ConnectionCommands:
    def __init__(self, connections: Connections | None) -> None:
        self.connections = connections

    async def listing(self, event: InboundMessage) -> OutboundMessage:
        person = event.actor.user_id
        if self.connections is None:
            return OutboundMessage(text=NONE_CONFIGURED, private_to=person)
        servers = await self.connections.connected(event.conversation.platform, person)
        if not servers:
            return OutboundMessage(text=NONE_CONNECTED, private_to=person)
        lines = ["Accounts you connected (I use them only for your own requests):"]
        lines += [f"• {server}" for server in servers]
        return OutboundMessage(
            text="\n".join(lines),
            buttons=tuple(Button(label=f"Disconnect {s}", value=s) for s in servers),
            decision_id=CONNECTION_ACTION,
            private_to=person,
        )

    async def press(self, action: InboundAction) -> str:
        server = action.choice
        if self.connections is None or server not in self.connections.servers:
            return "That account is not one I know."
        platform = action.conversation.platform
        person = action.actor.user_id
        if not await self.connections.disconnect(server, platform, person, revoke=True):
            return f"Your {server} account was not connected."
        return f"Disconnected {server}. I'll ask again if a request needs it."
