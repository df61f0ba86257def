"""A worker's own parts: the chat model, long-term memory and the runtime that runs the agent.

Apart from app.py so that a gateway never imports them: the model SDKs, numpy and the
memory index cost a process seconds of CPU before its first log line (the Anthropic SDK
alone about two), which a gateway has no use for and a loaded machine multiplies.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis.asyncio as aioredis

from adapters.base import OutboundMessage
from agent.llm.base import ChatModel
from agent.llm.fallback import FallbackModel
from agent.llm.usage import close_model
from agent.mcp.following import TaskPolling
from agent.outcomes import Outcome
from agent.protocols import Scheduler
from agent.tools import ToolSource
from bot.config import Settings
from bot.conversation.channels import Channels
from bot.conversation.commands import remembered_note
from bot.conversation.limits import Limits
from bot.ops.health import Health
from bot.ops.http import HttpServer
from bot.wiring.compose import build_agent
from bot.wiring.memory_setup import completion, open_memory
from bot.wiring.models import breaker_readiness, build_chat_model, build_side_model
from bot.wiring.platforms import Platforms
from bot.wiring.runtime import Runtime, build_runtime
from memory.extract import FactExtractor
from memory.store import RedisMemoryStore

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Work:
    model: ChatModel
    store: RedisMemoryStore
    runtime: Runtime
    side: ChatModel | None = None  # the side jobs' model, when it is another one

    async def close(self) -> None:
        await close_model(self.model)
        if isinstance(self.side, FallbackModel):  # its fallback is the chat model's, closed above
            await close_model(self.side.primary)
        try:  # recall's last-used times noted since its last write
            await self.store.write_used()
        except Exception as exc:
            log.warning("could not store recall's last-used times (%s)", type(exc).__name__)
        await self.store.embedder.close()


async def build_work(
    settings: Settings,
    redis: aioredis.Redis,
    *,
    http: HttpServer,
    platforms: Platforms,
    tools: ToolSource | None,
    limits: Limits,
    health: Health,
    tasks: TaskPolling | None = None,
) -> Work:
    store = await open_memory(settings, redis)
    model = build_chat_model(settings, redis)
    side = build_side_model(settings, model)
    if settings.anthropic.api_key is not None:
        http.add_check("breaker", breaker_readiness(settings, redis))

    def make_agent(scheduler: Scheduler):  # type: ignore[no-untyped-def]
        return build_agent(
            settings,
            redis,
            model=model,
            side_model=side,
            memory=store,
            scheduler=scheduler,
            tool_source=tools,
            channels=Channels(platforms.adapters),
        )

    after_run = None
    if settings.memory.extract:
        extractor = FactExtractor(completion(side), store)

        async def after_run(outcome: Outcome) -> OutboundMessage | None:
            state = outcome.state
            return remembered_note(await extractor.extract(state.messages, state.context))

    runtime = build_runtime(
        redis,
        settings,
        platforms.adapters,
        make_agent,
        memory=store,
        admission=limits.admission,
        charge=limits.charge_event,
        usage=limits.usage_text,
        after_run=after_run,
        health=health,
        mcp_tasks=tasks,
        offers=platforms.offers,
    )
    return Work(model=model, store=store, runtime=runtime, side=side if side is not model else None)
