"""Images on the wire: Anthropic image blocks, Ollama `images` only for models that see."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import pytest

from agent.llm.anthropic import AnthropicModel
from agent.llm.ollama import OllamaModel
from agent.messages import ChatRequest, ImageBlock, Message, TextBlock
from tests.fakes import anthropic as fa
from tests.fakes import ollama as fo
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.ollama import FakeOllama

PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005010201b4d1c2f50000000049454e44ae426082"
)
DATA = base64.b64encode(PIXEL).decode()


def with_image() -> ChatRequest:
    image = ImageBlock(media_type="image/png", data=DATA, width=1, height=1, name="dot.png")
    return ChatRequest(
        system="Be helpful.",
        messages=[Message(role="user", content=[image, TextBlock(text="what is this?")])],
    )


@pytest.fixture
async def models() -> AsyncIterator[list[AnthropicModel | OllamaModel]]:
    made: list[AnthropicModel | OllamaModel] = []
    yield made
    for model in made:
        await model.close()


async def test_anthropic_gets_an_image_block_with_the_exact_bytes(
    hosted: FakeAnthropic, models: list[AnthropicModel | OllamaModel]
) -> None:
    hosted.script(fa.text("A dot."))
    model = AnthropicModel(api_key="sk-ant-test", model="claude-test", base_url=hosted.url)
    models.append(model)
    await model.complete(with_image())
    content = hosted.message_calls[0].body["messages"][0]["content"]
    assert content[0] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": DATA},
    }
    assert base64.b64decode(content[0]["source"]["data"]) == PIXEL
    text = {k: v for k, v in content[1].items() if k != "cache_control"}  # the newest turn's
    assert text == {"type": "text", "text": "what is this?"}


@pytest.mark.network
async def test_ollama_sends_images_only_to_a_vision_model_and_asks_once(
    models: list[AnthropicModel | OllamaModel],
) -> None:
    async with FakeOllama(models=["llava:7b", "qwen2.5:7b"]) as fake:
        fake.vision.add("llava:7b")
        fake.responder = lambda body: fo.reply("A dot.")
        seeing = OllamaModel(host=fake.url, model="llava:7b", num_ctx=4096)
        blind = OllamaModel(host=fake.url, model="qwen2.5:7b", num_ctx=4096)
        models.extend([seeing, blind])

        await seeing.complete(with_image())
        await seeing.complete(with_image())
        user = fake.calls("/api/chat")[0].body["messages"][-1]
        assert user["images"] == [DATA] and user["content"] == "what is this?"
        assert fake.count("/api/show") == 1  # the capability is cached

        await blind.complete(with_image())
        user = fake.calls("/api/chat")[-1].body["messages"][-1]
        assert "images" not in user
        assert "cannot see images" in user["content"] and "dot.png" in user["content"]
        assert user["content"].endswith("what is this?")


async def test_ollama_text_only_requests_never_ask_about_vision(
    local: FakeOllama, models: list[AnthropicModel | OllamaModel]
) -> None:
    local.script(fo.reply("Hi."))
    model = OllamaModel(host=local.url, model="qwen2.5:7b", num_ctx=4096)
    models.append(model)
    await model.complete(ChatRequest(system="", messages=[Message.user("hi")]))
    assert local.count("/api/show") == 0
