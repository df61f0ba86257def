"""An approval prompt that carries a plan, delivered as Slack's plan stream.

On the agent surface, in a thread, the prompt is one streamed message: `chat.startStream` in
plan display (`task_display_mode="plan"`) with a `plan_update` chunk and one `task_update` per
proposed step (pending), then `chat.stopStream` with the prompt's own blocks (the exact calls
and the Approve / Reject buttons) below the plan. The session stays waiting: the stop says
so, since Slack's default after a stop is "active".

A stream cannot be appended to once stopped, so the decision is shown as any decided prompt
is: `chat.update` by ts with new blocks, which replace the message's content, plan included
(inferred: Slack documents that chunks render as blocks, not what an update keeps of them).

Whatever Slack refuses, the prompt arrives once with its buttons: a refused start leaves no
message and the caller posts the ordinary prompt; a refused stop gets the blocks by
`chat.update`, or else the half message is deleted and the caller posts the prompt.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackClientError
from slack_sdk.models.messages.chunk import Chunk, PlanUpdateChunk, TaskUpdateChunk
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import ConversationKey, ProposedPlan
from adapters.slack.delivery import error_code as _error

log = logging.getLogger(__name__)

TITLE_LIMIT = 256  # characters of a plan or task title kept (Slack's limits are not published)
WAITING = "suspended"  # the session's status while the prompt waits (agent.SLACK_STATUS)


def chunks(plan: ProposedPlan) -> list[Chunk]:
    """The plan's title, and each step as a pending task titled with the tool that runs."""
    drawn: list[Chunk] = [PlanUpdateChunk(title=plan.title[:TITLE_LIMIT])]
    for number, (tool, described) in enumerate(plan.steps, start=1):
        task = TaskUpdateChunk(
            id=f"proposed-{number}",
            title=tool[:TITLE_LIMIT],
            status="pending",
            details=f"described as: {described}" if described else None,
        )
        drawn.append(task)
    return drawn


async def post_plan(
    client: AsyncWebClient,
    conversation: ConversationKey,
    plan: ProposedPlan,
    fallback: str,
    blocks: list[dict[str, Any]],
) -> str | None:
    """The prompt as a plan stream in the conversation's thread; its ts, or None when no
    message of it is left (the caller then posts the ordinary prompt)."""
    assert conversation.thread_id is not None
    channel = conversation.chat_id
    try:
        started = await client.chat_startStream(
            channel=channel,
            thread_ts=conversation.thread_id,
            recipient_user_id=plan.requester,
            recipient_team_id=plan.team or conversation.team_id,
            task_display_mode="plan",
            chunks=chunks(plan),
        )
    except SlackClientError as exc:
        log.warning("Slack refused the plan of an approval (%s); posting it plainly", _error(exc))
        return None
    ts = str(started.get("ts") or "")
    if not ts:
        return None
    try:
        await client.chat_stopStream(channel=channel, ts=ts, blocks=blocks, session_status=WAITING)
        return ts
    except SlackClientError as exc:
        log.warning("Slack refused to end an approval's plan (%s); replacing it", _error(exc))
    try:
        await client.chat_update(channel=channel, ts=ts, text=fallback, blocks=blocks)
        return ts
    except SlackClientError as exc:
        log.warning("could not put the buttons under a plan (%s); posting it plainly", _error(exc))
    try:
        await client.chat_delete(channel=channel, ts=ts)
    except SlackClientError:
        log.warning("could not take back an unfinished plan in %s", conversation.id)
    return None
