"""The chat model from settings: Anthropic with Ollama as fallback, or Ollama alone."""

from __future__ import annotations

import redis.asyncio as aioredis

from agent.llm.anthropic import AnthropicModel
from agent.llm.base import ChatModel
from agent.llm.breaker import BreakerPolicy
from agent.llm.breaker_redis import redis_breaker
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.llm.usage import MeteredModel
from bot.config import Settings


def build_chat_model(settings: Settings, redis: aioredis.Redis) -> ChatModel:
    llm = settings.llm
    local = MeteredModel(
        OllamaModel(
            host=settings.ollama.host,
            model=settings.ollama.model,
            num_ctx=settings.ollama.num_ctx,
            timeout=settings.ollama.timeout,
        ),
        llm.prices,
    )
    if settings.anthropic.api_key is None:
        return local
    hosted = MeteredModel(
        AnthropicModel(
            api_key=settings.anthropic.api_key.get_secret_value(),
            model=settings.anthropic.model,
            base_url=settings.anthropic.base_url,
            timeout=llm.timeout,
        ),
        llm.prices,
    )
    breaker = redis_breaker(
        redis,
        f"{settings.redis.key_prefix}:breaker:anthropic",
        "anthropic",
        BreakerPolicy(
            failures=llm.breaker_failures,
            cooldown=llm.breaker_cooldown,
            max_cooldown=llm.breaker_max_cooldown,
            auth_cooldown=llm.breaker_auth_cooldown,
        ),
    )
    # A little past the SDK's own timeout, so the SDK's error is the one we usually see.
    return FallbackModel(
        hosted, local, breaker, timeout=llm.timeout + 1.0, suspect_after=llm.suspect_after
    )
