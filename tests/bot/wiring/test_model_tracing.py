"""The Anthropic client traces its calls only when OpenTelemetry is set up for the process:
without it, every call would build a span that goes nowhere."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from opentelemetry import trace

from agent.llm.anthropic import AnthropicModel, tracing_configured
from agent.llm.fallback import FallbackModel
from agent.llm.usage import MeteredModel, close_model
from bot.config import Settings
from bot.wiring.models import build_chat_model


def built_anthropic(redis: aioredis.Redis) -> tuple[Any, AnthropicModel]:
    config = Settings.load(
        env_file=None,
        anthropic={"ANTHROPIC_API_KEY": "sk-ant-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    model = build_chat_model(config, redis)
    assert isinstance(model, FallbackModel) and isinstance(model.primary, MeteredModel)
    hosted = model.primary.inner
    assert isinstance(hosted, AnthropicModel)
    return model, hosted


async def test_the_hosted_client_has_no_tracing_by_default(redis: aioredis.Redis) -> None:
    model, hosted = built_anthropic(redis)
    try:
        assert hosted.client.open_telemetry["traces"]["enabled"] is False
    finally:
        await close_model(model)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_TRACES_EXPORTER", "otlp"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
        ("ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE", "content"),
    ],
)
async def test_the_hosted_client_traces_when_the_operator_sets_it_up(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    model, hosted = built_anthropic(redis)
    try:
        traces = hosted.client.open_telemetry["traces"]
        assert traces["enabled"] is True
        # the SDK's own variables still apply
        expected = "content" if variable.startswith("ANTHROPIC_") else "metadata_only"
        assert traces["content_mode"] == expected
    finally:
        await close_model(model)


async def test_the_sdks_own_switch_still_turns_tracing_off(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("ANTHROPIC_OPEN_TELEMETRY", "false")
    model, hosted = built_anthropic(redis)
    try:
        assert hosted.client.open_telemetry["traces"]["enabled"] is False
    finally:
        await close_model(model)


class HostProvider(trace.TracerProvider):
    """A tracer provider a host program installed (what an OpenTelemetry SDK would be)."""

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return trace.NoOpTracer()


def test_what_counts_as_tracing_set_up() -> None:
    assert not tracing_configured({})  # this process has only OpenTelemetry's proxy provider
    assert not tracing_configured({}, trace.NoOpTracerProvider())
    assert tracing_configured({}, HostProvider())
    assert not tracing_configured({"OTEL_TRACES_EXPORTER": "none"})
    assert not tracing_configured({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"})
    assert tracing_configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318"})
    assert tracing_configured({"OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"})
