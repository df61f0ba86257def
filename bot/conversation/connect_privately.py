"""A Connect button for a run started in a Telegram group goes to the person's private chat.

A group has no message only one member sees, and whoever pressed a Connect link posted there
would connect *their* account to the requester's run. So the prompt is sent to the
requester's private chat, and the group hears one sentence without any link. When Telegram
refuses that message (the person never started a chat with Parley: 403 "bot can't initiate
conversation with a user"), the group is asked, in one sentence, that they open one; the
question still waits, so "try again" in the group brings a new button.
"""

from __future__ import annotations

from adapters.base import PLAIN, Addressing, OutboundMessage
from adapters.traits import mention
from agent.outcomes import AwaitingAnswer, Outcome
from bot.conversation.effects import Prompt
from bot.conversation.texts import CONNECT_SENT, CONNECT_UNREACHABLE


def prompt(outcome: Outcome, message: OutboundMessage, addressing: Addressing = PLAIN) -> Prompt:
    """The prompt effect for `message`: privately for a Connect link in a shared chat that
    cannot show it to the requester alone (a Telegram group)."""
    context = outcome.state.context
    linked = isinstance(outcome, AwaitingAnswer) and outcome.link is not None
    if not linked or addressing.ephemeral or context.is_direct:
        return Prompt(message=message)
    who = mention(context.platform, context.user_id, context.user_name)
    return Prompt(
        message=message,
        private_chat=context.user_id,
        sent=OutboundMessage(text=CONNECT_SENT.format(who=who), allowed_mentions=frozenset({who})),
        unreachable=OutboundMessage(
            text=CONNECT_UNREACHABLE.format(who=who), allowed_mentions=frozenset({who})
        ),
    )
