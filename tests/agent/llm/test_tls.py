"""The model clients share one TLS context: building one reads the whole CA bundle, which every
model client (and every test that builds one) paid again."""

from __future__ import annotations

import ssl

import pytest

from agent.llm.anthropic import AnthropicModel
from agent.llm.ollama import OllamaModel
from agent.llm.tls import tls_context


async def test_model_clients_read_the_ca_bundle_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[ssl.SSLContext] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        built.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return built[-1]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    tls_context.cache_clear()
    try:
        for _ in range(3):
            hosted = AnthropicModel(api_key="sk-ant-test", model="claude-test", timeout=1.0)
            local = OllamaModel(host="http://127.0.0.1:9", model="qwen2.5:7b", num_ctx=4096)
            await hosted.close()
            await local.close()
        assert len(built) == 1 and tls_context() is built[0]
    finally:
        tls_context.cache_clear()
