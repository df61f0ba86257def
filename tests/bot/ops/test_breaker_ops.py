"""The hosted model's breaker follows the operator: a replaced key or model starts it afresh,
and `parley doctor`, `/readyz` and `parley breaker` say its state and why. Real Redis, the
real Anthropic and Ollama clients against their fakes, the service's own wiring."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from agent.llm.fallback import FallbackModel
from agent.messages import ChatRequest, Message
from bot.cli import main
from bot.config import Settings
from bot.wiring.models import (
    breaker_key,
    breaker_readiness,
    breaker_state,
    build_chat_model,
    check_breaker,
)
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama
from tests.private_redis import private_redis


def request() -> ChatRequest:
    return ChatRequest(system="You are Parley.", messages=[Message.user("hi")])


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeAnthropic, FakeOllama]]:
    async with FakeAnthropic() as hosted, FakeOllama(models=["qwen2.5:7b"]) as local:
        local.responder = lambda body: fo.reply("from ollama")
        yield hosted, local


def settings_for(
    redis_url: str, hosted: FakeAnthropic, local: FakeOllama, *, key: str, model: str
) -> Settings:
    return Settings.load(
        env_file=None,
        redis={"REDIS_URL": redis_url},
        anthropic={
            "ANTHROPIC_API_KEY": key,
            "ANTHROPIC_MODEL": model,
            "ANTHROPIC_BASE_URL": hosted.url,
        },
        ollama={"OLLAMA_HOST": local.url, "OLLAMA_MODEL": "qwen2.5:7b"},
    )


async def answer(settings: Settings, redis: aioredis.Redis) -> str:
    """One model call by a freshly started process: who answered."""
    model = build_chat_model(settings, redis)
    assert isinstance(model, FallbackModel)
    try:
        return (await model.complete(request())).provider
    finally:
        await model.close()


async def test_a_replaced_key_is_tried_at_once_not_after_the_auth_cooldown(
    redis: aioredis.Redis, redis_url: str, fakes
) -> None:
    hosted, local = fakes
    revoked = settings_for(redis_url, hosted, local, key="sk-ant-revoked", model="claude-test")
    hosted.script(fa.error(401))
    assert await answer(revoked, redis) == "ollama"
    status = await breaker_state(revoked, redis).status()
    assert status.state == "open" and status.open_for > 3000  # the auth cooldown
    assert "credentials" in status.reason and "401" in status.reason
    # a restart with the same key keeps the state: Anthropic is not even asked
    calls = len(hosted.message_calls)
    assert await answer(revoked, redis) == "ollama" and len(hosted.message_calls) == calls
    # the operator replaces the key: the next process starts the breaker afresh
    replaced = settings_for(redis_url, hosted, local, key="sk-ant-new", model="claude-test")
    hosted.script(fa.text("from anthropic"))
    assert await answer(replaced, redis) == "anthropic"
    assert (await breaker_state(replaced, redis).status()).state == "closed"
    raw = await redis.hgetall(breaker_key(replaced))
    assert b"sk-ant-new" not in b"".join([*raw.keys(), *raw.values()])  # a digest, not the key


async def test_a_changed_model_starts_the_breaker_afresh_too(
    redis: aioredis.Redis, redis_url: str, fakes
) -> None:
    hosted, local = fakes
    first = settings_for(redis_url, hosted, local, key="sk-ant-k", model="claude-old")
    hosted.script(fa.error(401))
    assert await answer(first, redis) == "ollama"
    hosted.script(fa.text("from anthropic"))
    moved = settings_for(redis_url, hosted, local, key="sk-ant-k", model="claude-new")
    assert await answer(moved, redis) == "anthropic"


async def test_doctor_readyz_and_the_cli_say_the_state_and_why(
    redis: aioredis.Redis, redis_url: str, fakes, tmp_path: Path, capsys
) -> None:
    hosted, local = fakes
    settings = settings_for(redis_url, hosted, local, key="sk-ant-k", model="claude-test")
    assert (await check_breaker(settings)).status == "ok"
    hosted.script(fa.error(529, retry_after=120))
    assert await answer(settings, redis) == "ollama"
    check = await check_breaker(settings)
    assert check.status == "warn" and "open for" in check.detail and "HTTP 529" in check.detail
    assert "parley breaker reset" in check.hint
    ready, detail = await breaker_readiness(settings, redis)()
    assert ready and detail.startswith("anthropic breaker open for") and "HTTP 529" in detail
    env = tmp_path / ".env"
    env.write_text(
        f"REDIS_URL={redis_url}\nANTHROPIC_API_KEY=sk-ant-k\nANTHROPIC_MODEL=claude-test\n"
        f"ANTHROPIC_BASE_URL={hosted.url}\n"
    )
    assert await asyncio.to_thread(main, ["--env-file", str(env), "breaker"]) == 0
    assert "open for" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["--env-file", str(env), "breaker", "reset"]) == 0
    assert "reset" in capsys.readouterr().out
    assert (await breaker_state(settings, redis).status()).state == "closed"
    hosted.script(fa.text("from anthropic"))
    assert await answer(settings, redis) == "anthropic"


@pytest.mark.network
async def test_redis_away_at_start_then_back_with_an_old_state(tmp_path: Path, fakes) -> None:
    """The breaker fails open while Redis is away; once it is back, the state another key
    left is dropped at the next call, not believed."""
    hosted, local = fakes
    async with private_redis(tmp_path) as server:
        redis = server.client()
        try:
            old = settings_for(server.url, hosted, local, key="sk-ant-old", model="claude-test")
            hosted.script(fa.error(401))
            assert await answer(old, redis) == "ollama"
            new = settings_for(server.url, hosted, local, key="sk-ant-new", model="claude-test")
            model = build_chat_model(new, redis)
            try:
                await server.down()
                hosted.script(fa.text("through"))
                assert (await model.complete(request())).provider == "anthropic"  # fails open
                await server.up()
                hosted.script(fa.text("and again"))
                assert (await model.complete(request())).provider == "anthropic"
                status = await breaker_state(new, redis).status()
                assert status.state == "closed" and "credentials" not in status.reason
            finally:
                await model.close()  # type: ignore[attr-defined]
        finally:
            await redis.aclose()


async def test_no_hosted_model_no_breaker(redis_url: str, fakes) -> None:
    hosted, local = fakes
    settings = Settings.load(
        env_file=None, redis={"REDIS_URL": redis_url}, ollama={"OLLAMA_HOST": local.url}
    )
    assert (await check_breaker(settings)).status == "not configured"
