"""The chat model from settings: Anthropic with Ollama as fallback, or Ollama alone; and what
operators see of the hosted model's circuit breaker (`parley doctor`, `/readyz`,
`parley breaker`)."""

from __future__ import annotations

import redis.asyncio as aioredis

from agent.llm.anthropic import AnthropicModel
from agent.llm.base import ChatModel
from agent.llm.breaker import BreakerPolicy
from agent.llm.breaker_redis import RedisBreakerState, identity_of, redis_breaker
from agent.llm.fallback import FallbackModel
from agent.llm.ollama import OllamaModel
from agent.llm.usage import MeteredModel
from bot.config import Settings
from bot.ops.checks import Check
from bot.ops.http import ReadinessCheck


def build_chat_model(settings: Settings, redis: aioredis.Redis) -> ChatModel:
    llm = settings.llm
    local = MeteredModel(
        OllamaModel(
            host=settings.ollama.host,
            model=settings.ollama.model,
            num_ctx=settings.ollama.num_ctx,
            timeout=settings.ollama.timeout,
            think=ollama_think(settings.ollama.think),
        ),
        llm.prices,
    )
    if settings.anthropic.api_key is None:
        return local
    hosted = _claude(settings, settings.anthropic.model)
    breaker = redis_breaker(
        redis,
        breaker_key(settings),
        "anthropic",
        BreakerPolicy(
            failures=llm.breaker_failures,
            cooldown=llm.breaker_cooldown,
            max_cooldown=llm.breaker_max_cooldown,
            auth_cooldown=llm.breaker_auth_cooldown,
        ),
        identity=breaker_identity(settings),  # a new key or model starts it afresh
    )
    # A little past the SDK's own timeout, so the SDK's error is the one we usually see.
    return FallbackModel(
        hosted, local, breaker, timeout=llm.timeout + 1.0, suspect_after=llm.suspect_after
    )


def build_side_model(settings: Settings, chat: ChatModel) -> ChatModel:
    """The model for side jobs (compaction summaries, memory extraction):
    `PARLEY_ANTHROPIC_SIDE_MODEL` behind the chat model's own fallback and breaker (the same
    provider, the same key), or the chat model itself."""
    side = settings.anthropic.side_model
    if not side or side == settings.anthropic.model or not isinstance(chat, FallbackModel):
        return chat
    return FallbackModel(
        _claude(settings, side),
        chat.fallback,
        chat.breaker,
        timeout=chat.timeout,
        suspect_after=chat.suspect_after,
    )


def _claude(settings: Settings, model: str) -> MeteredModel:
    anthropic = settings.anthropic
    return MeteredModel(
        AnthropicModel(
            api_key=anthropic.api_key.get_secret_value() if anthropic.api_key else "",
            model=model,
            base_url=anthropic.base_url,
            timeout=settings.llm.timeout,
            effort=anthropic.effort,
            display=anthropic.thinking_display,
        ),
        settings.llm.prices,
    )


def ollama_think(value: str | None) -> bool | str | None:
    """`PARLEY_OLLAMA_THINK` as Ollama's `think`: a boolean, a level, or unset."""
    return {"true": True, "false": False, None: None}.get(value, value)


def breaker_key(settings: Settings) -> str:
    return f"{settings.redis.key_prefix}:breaker:anthropic"


def breaker_identity(settings: Settings) -> str:
    key = settings.anthropic.api_key
    return identity_of(
        key.get_secret_value() if key is not None else None,
        settings.anthropic.model,
        settings.anthropic.base_url,
    )


def breaker_state(settings: Settings, redis: aioredis.Redis) -> RedisBreakerState:
    return RedisBreakerState(redis, breaker_key(settings), identity=breaker_identity(settings))


def breaker_readiness(settings: Settings, redis: aioredis.Redis) -> ReadinessCheck:
    """Detail for /readyz: an open breaker degrades answers (Ollama writes them) but the
    process stays ready."""
    state = breaker_state(settings, redis)

    async def check() -> tuple[bool, str]:
        status = await state.status()
        if status.identity and status.identity != state.identity:
            return True, "anthropic breaker: learned with another key or model; reset at first use"
        return True, f"anthropic breaker {status.describe()}"

    return check


async def check_breaker(settings: Settings) -> Check:
    """For `parley doctor`: the hosted model's breaker, as the service shares it in Redis."""
    from bot.wiring.connection import redis_connection

    if settings.anthropic.api_key is None:
        return Check(name="breaker", status="not configured", detail="no hosted model")
    if settings.redis.url is None:
        return Check(
            name="breaker",
            status="not configured",
            detail="kept in the embedded Redis; `parley breaker` shows it while Parley is stopped",
        )
    async with redis_connection(settings) as redis:
        state = breaker_state(settings, redis)
        try:
            status = await state.status()
        except Exception as exc:
            return Check(
                name="breaker", status="warn", detail=f"cannot read it ({type(exc).__name__})"
            )
    if status.identity and status.identity != state.identity:
        detail = f"{status.describe()}, learned with another key or model: reset at next start"
        return Check(name="breaker", status="ok", detail=detail)
    if status.state == "closed":
        return Check(name="breaker", status="ok", detail=f"anthropic {status.describe()}")
    return Check(
        name="breaker",
        status="warn",
        detail=f"anthropic {status.describe()}",
        hint="fix the cause (see the reason), then `parley breaker reset` to try it at once",
    )
