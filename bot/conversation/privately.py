"""Once any part of a run is private to one person, everything that run sends is theirs alone.

A run turns private when an approved call read something for its requester only
(`ApprovalRequired(private=True)`, `RunState.private_to`). From then on its questions,
approval prompts, the messages that show an approval's whole arguments, the lines about
standing approvals, the decided prompt and the answer all go to that person alone: a Slack
ephemeral message, or their private chat with Parley on Telegram. A shared chat is where
the leak would be; a direct chat is private already, so nothing changes there.

A private run's decision is bound to the message it was put on: only a press on that message
(on Telegram, in the person's private chat, from where the press is handed to the decision's
conversation) decides it.
"""

from __future__ import annotations

from dataclasses import replace

from adapters.base import ConversationKey, InboundAction, OutboundMessage
from agent.outcomes import Outcome
from bot.conversation.effects import Answer, Edit, Effect, Prompt, Send
from bot.runtime.decisions import Decision
from bot.runtime.sessions import Session


def owner_of_outcome(outcome: Outcome) -> str | None:
    """The person a run's outcome is for alone, in a shared chat; None when it is everyone's."""
    state = outcome.state
    return None if state.context.is_direct else state.private_to


def owner_of_session(session: Session) -> str | None:
    """The person the session's waiting or working run is for alone, in a shared chat."""
    state = session.state
    if state is None or session.status == "idle" or state.context.is_direct:
        return None
    return state.private_to


def kept_to(owner: str | None, effects: list[Effect]) -> list[Effect]:
    """`effects` with every message they post or edit shown to `owner` alone (when set)."""
    if owner is None:
        return effects
    return [_kept(owner, effect) for effect in effects]


def _kept(owner: str, effect: Effect) -> Effect:
    match effect:
        case Send() | Answer() | Prompt() | Edit():
            return replace(effect, message=_to(owner, effect.message))
        case _:
            return effect


def _to(owner: str, message: OutboundMessage) -> OutboundMessage:
    # a prompt's audience (its deciders in a group) is one person now; nothing else sees it
    return replace(message, private_to=owner, audience=())


def bound(decision: Decision, press: InboundAction) -> bool:
    """Whether a press on a private run's decision came from the message it was put on: that
    message (a Slack ephemeral), or the person's own private chat (Telegram's)."""
    if decision.private_to is None:
        return True
    if press.actor.user_id != decision.private_to or press.message is None:
        return False
    where = press.message.conversation
    chat = ConversationKey.parse(decision.conversation_id).chat_id
    same = where.chat_id == chat and press.message.message_id == decision.message_id
    return same or where.chat_id == decision.private_to


def handed_over(decision: Decision | None, press: InboundAction) -> bool:
    """A press on a private run's prompt that reached another conversation (Telegram: the
    person's private chat; Slack: an ephemeral message's press told without its thread): it
    belongs to the decision's conversation (its lock, its session), and is queued there."""
    return (
        decision is not None
        and decision.private_to is not None
        and decision.conversation_id != press.conversation.id
        and bound(decision, press)
    )
