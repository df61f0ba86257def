"""Builds the agent from settings: model, tools (built-in, entry points, skills folder)."""

from __future__ import annotations

import logging

import redis.asyncio as aioredis

from agent.builtin_tools import builtin_registry
from agent.channels import ChannelReader, read_channel_tool
from agent.llm.base import ChatModel
from agent.llm.catalog import lookup, token_factor
from agent.loop import Agent, AgentConfig
from agent.protocols import MemoryStore, Scheduler
from agent.tools import ToolRegistry, ToolSource
from bot.config import Settings
from bot.wiring.models import build_chat_model

log = logging.getLogger(__name__)


def agent_config(settings: Settings) -> AgentConfig:
    agent = settings.agent
    # Budgets and windows are set in the tokens of 4.x; the current generation's tokenizer
    # counts about 30% more for the same text, so a run keeps the same room in real tokens,
    # and the window (estimated at 4.x's rate) shrinks to hold as many real tokens.
    factor = token_factor(settings.anthropic.model) if settings.anthropic.api_key else 1.0
    known = lookup(settings.anthropic.model) if settings.anthropic.api_key else None
    window = (
        agent.context_tokens if known is None else min(agent.context_tokens, known.context_window)
    )
    return AgentConfig(
        max_steps=agent.max_steps,
        token_budget=round(agent.run_token_budget * factor),
        deadline=agent.run_deadline,
        context_tokens=round(window / factor),
        tool_timeout=agent.tool_timeout,
        tool_retries=agent.tool_retries,
        tool_output_limit=agent.tool_output_limit,
        max_tokens=settings.anthropic.max_tokens,
        backoff_base=agent.tool_backoff,
        backoff_max=agent.tool_backoff_max,
        recall_k=settings.memory.recall_k,
        stream=settings.streaming.enabled,
    )


def build_tools(settings: Settings, channels: ChannelReader | None = None) -> ToolRegistry:
    registry = builtin_registry(settings.schedules.min_interval)
    if channels is not None:
        registry.register(read_channel_tool(channels))
    extra = registry.load_entry_points()
    if settings.agent.skills_dir is not None:
        extra += registry.load_skills_dir(settings.agent.skills_dir)
    if extra:
        log.info("loaded tools: %s", ", ".join(extra))
    return registry


def build_agent(
    settings: Settings,
    redis: aioredis.Redis,
    *,
    model: ChatModel | None = None,
    side_model: ChatModel | None = None,
    memory: MemoryStore | None = None,
    scheduler: Scheduler | None = None,
    tools: ToolRegistry | None = None,
    tool_source: ToolSource | None = None,
    channels: ChannelReader | None = None,
) -> Agent:
    return Agent(
        model or build_chat_model(settings, redis),
        tools or build_tools(settings, channels),
        side_model=side_model,
        memory=memory,
        scheduler=scheduler,
        config=agent_config(settings),
        tool_source=tool_source,
    )
