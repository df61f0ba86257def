"""Every embedder PARLEY_EMBEDDER can name, behind the one `Embedder` interface: the bundled
models for real, Ollama and an OpenAI-compatible server through local fakes that speak their
HTTP APIs; and the store using each as its model expects."""

from __future__ import annotations

import time

import numpy as np
import pytest
import redis.asyncio as aioredis

from agent.protocols import RunContext
from bot.config import ConfigError, Settings
from bot.wiring.memory_setup import build_embedder, memory_config
from memory import (
    Embedder,
    EmbeddingServiceError,
    MemoryConfig,
    MemoryIndexMismatch,
    multilingual_embedder,
    open_store,
    openai_embedder,
)
from memory.config import MINILM
from memory.e5 import TUNING
from tests.fakes.ollama import FakeOllama
from tests.fakes.openai_embeddings import FakeEmbeddings

LENA = RunContext(
    conversation_id="telegram:501:-",
    platform="telegram",
    user_id="501",
    chat_id="501",
    is_direct=True,
)

# A person on Telegram writing in Spanish, German and Russian; questions in English too.
FACTS = [
    "Mi hermana Lucía vive en Valencia y trabaja como enfermera",
    "Soy alérgica a los frutos secos, sobre todo a las nueces",
    "Meine Zahnärztin heißt Dr. Keller, Termin jeden März",
    "Unser Hund Bruno frisst nur Trockenfutter ohne Getreide",
    "Мой пароль от Wi-Fi на даче записан на холодильнике",
    "Я бегаю по утрам в парке у реки три раза в неделю",
]
QUESTIONS = [
    ("¿dónde vive mi hermana?", 0),
    ("where does my sister live?", 0),
    ("am I allergic to any nuts?", 1),
    ("wann muss ich zum Zahnarzt?", 2),
    ("when is my dentist appointment?", 2),
    ("what kind of food does the dog get?", 3),
    ("где найти пароль от вайфая на даче?", 4),
    ("how often do I go running?", 5),
]


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return multilingual_embedder()


async def test_the_multilingual_model_embeds_memories_and_queries_with_e5s_prefixes(
    e5: Embedder,
) -> None:
    passage = np.asarray(await e5.embed("Ich wohne in Berlin"))
    query = np.asarray(await e5.embed_query("Ich wohne in Berlin"))
    assert passage.shape == query.shape == (384,) and e5.dims == 384
    assert abs(float(np.linalg.norm(passage)) - 1) < 1e-4
    assert abs(float(np.linalg.norm(query)) - 1) < 1e-4
    # the same words as a passage and as a query are different inputs to e5
    assert 0.8 < float(passage @ query) < 0.999
    many = np.asarray(await e5.embed_many(["Ich wohne in Berlin", "I live in Berlin"]))
    assert np.allclose(many[0], passage, atol=1e-5)
    queries = np.asarray(await e5.embed_queries(["Ich wohne in Berlin"]))
    assert np.allclose(queries[0], query, atol=1e-5)
    assert e5.model_id == "multilingual-e5-small-q4" and e5.tuning == TUNING


async def test_a_long_text_is_cut_to_what_the_model_reads(e5: Embedder) -> None:
    """The engine would embed a long text window by window (seconds each under load):
    it is cut to MAX_TOKENS first, and what is read is its beginning."""
    from memory.e5 import _E5, MAX_TOKENS

    model = _E5()
    long = "Mi agenda de la semana: " + "reunión con el equipo de ventas, " * 400
    clipped = model.clip(long, is_query=False)
    assert long.startswith(clipped) and len(clipped) < len(long)
    assert model.model.token_count(clipped, False) <= MAX_TOKENS
    assert model.model.token_count(long[: len(clipped) + 40], False) > MAX_TOKENS
    vector = np.asarray(await e5.embed(long))
    assert np.allclose(vector, model.passages([clipped])[0], atol=1e-5)
    short = "Mi agenda de la semana: reunión"
    assert model.clip(short, is_query=True) == short


async def test_a_question_in_another_language_finds_the_fact(
    redis: aioredis.Redis, e5: Embedder
) -> None:
    store = await open_store(redis, e5, config=MemoryConfig.tuned(e5.tuning))
    for fact in FACTS:
        await store.remember(fact, LENA)
    for question, wanted in QUESTIONS:
        found = [record.text for record in await store.recall(question, LENA)]
        assert FACTS[wanted] in found, (question, found)
    # (how often an unrelated question still gets a memory: bench/bench_recall.py measures it)


async def test_the_index_refuses_another_embedder_with_the_command_to_run(
    redis: aioredis.Redis, embedder: Embedder, e5: Embedder
) -> None:
    store = await open_store(redis, embedder)
    await store.remember("Mi hermana vive en Valencia", LENA)
    with pytest.raises(MemoryIndexMismatch) as refused:
        await open_store(redis, e5)
    message = str(refused.value)
    assert "\n" not in message
    assert "all-MiniLM-L6-v2" in message and "multilingual-e5-small-q4" in message
    assert "parley memory reindex" in message


@pytest.mark.network
async def test_an_openai_compatible_server_embeds_in_batches_it_accepts() -> None:
    async with FakeEmbeddings(dimensions=768, api_key="sk-local", max_batch=32) as fake:
        embedder = await openai_embedder(f"{fake.url}/v1", "bge-m3", "sk-local", call_timeout=5)
        try:
            assert (embedder.name, embedder.model_id, embedder.dims) == (
                "openai",
                "openai:bge-m3",
                768,
            )
            fake.shuffled = True  # items may come in any order: each carries its index
            texts = [f"memory number {n}" for n in range(70)]
            vectors = await embedder.embed_many(texts)
            assert [len(v) for v in vectors] == [768] * 70
            assert np.allclose(vectors[41], fake.embed([texts[41]])[0])
            sent = fake.calls("/v1/embeddings")[1:]  # after the dimension probe
            assert [len(call.body["input"]) for call in sent] == [32, 32, 6]
            assert all(call.body["model"] == "bge-m3" for call in sent)
            assert all(call.headers["Authorization"] == "Bearer sk-local" for call in sent)
            assert np.allclose(await embedder.embed_query("hello"), fake.embed(["hello"])[0])
        finally:
            await embedder.close()


@pytest.mark.network
async def test_an_openai_compatible_server_that_misbehaves_is_an_error_not_a_vector() -> None:
    async with FakeEmbeddings(dimensions=16, api_key="right") as fake:
        with pytest.raises(Exception, match="401"):
            await openai_embedder(fake.url, "m", "wrong", call_timeout=5)
        embedder = await openai_embedder(fake.url, "m", "right", call_timeout=5)
        try:
            fake.fail_next(503)
            with pytest.raises(EmbeddingServiceError, match="503"):
                await embedder.embed("x")
            fake.embed = lambda texts: [[0.1, 0.2]]  # one vector for any number of inputs
            with pytest.raises(EmbeddingServiceError, match="expected 2 embeddings"):
                await embedder.embed_many(["a", "b"])
        finally:
            await embedder.close()
    started = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - refused connection, whatever httpx calls it
        await embedder.embed("nobody listens now")
    assert time.monotonic() - started < 5


@pytest.mark.network
async def test_recall_through_an_openai_compatible_server_serving_minilm(
    redis: aioredis.Redis, embedder: Embedder
) -> None:
    """A text-embeddings-inference server with all-MiniLM-L6-v2 behind the OpenAI API: the
    same vectors as the bundled model, so the same memories come back."""
    async with FakeEmbeddings(dimensions=384) as fake:
        fake.embed = lambda texts: embedder.vectorizer.embed_many(texts)
        remote = await openai_embedder(fake.url, "all-MiniLM-L6-v2", call_timeout=5)
        try:
            store = await open_store(redis, remote)
            await store.remember("I'm allergic to peanuts", LENA)
            await store.remember("My car is a blue Toyota", LENA)
            found = await store.recall("can I eat a peanut butter sandwich?", LENA)
            assert [record.text for record in found] == ["I'm allergic to peanuts"]
            assert "I'm allergic to peanuts" in fake.inputs()
        finally:
            await remote.close()


@pytest.mark.network
async def test_each_setting_builds_its_embedder_with_its_own_distances() -> None:
    async with (
        FakeOllama(models=["bge-m3"], dimensions=1024) as ollama,
        FakeEmbeddings(dimensions=768) as server,
    ):
        built = {
            "ollama": Settings.load(
                env_file=None,
                ollama={"OLLAMA_HOST": ollama.url, "OLLAMA_EMBED_MODEL": "bge-m3"},
                memory={"PARLEY_EMBEDDER": "ollama"},
            ),
            "openai": Settings.load(
                env_file=None,
                memory={
                    "PARLEY_EMBEDDER": "openai",
                    "PARLEY_EMBED_URL": server.url,
                    "PARLEY_EMBED_MODEL": "gte",
                    "PARLEY_RECALL_MAX_DISTANCE": "0.5",
                },
            ),
            "multilingual": Settings.load(
                env_file=None, memory={"PARLEY_EMBEDDER": "multilingual"}
            ),
        }
        found = {}
        for name, settings in built.items():
            made = await build_embedder(settings)
            found[name] = (made.model_id, made.dims, memory_config(settings, made.tuning))
            await made.close()
        assert [sent.body["model"] for sent in ollama.calls("/api/embed")][:1] == ["bge-m3"]
    assert found["ollama"][:2] == ("ollama:bge-m3", 1024)
    assert found["openai"][:2] == ("openai:gte", 768)
    assert found["multilingual"][:2] == ("multilingual-e5-small-q4", 384)
    # an operator's distance wins; the rest are the model's own
    assert found["openai"][2].max_distance == 0.5
    assert found["openai"][2].margin == MINILM.margin
    assert found["multilingual"][2].max_distance == TUNING.max_distance
    assert found["multilingual"][2].merge_distance == TUNING.merge_distance


def test_openai_needs_a_url_and_a_model() -> None:
    with pytest.raises(ConfigError, match="PARLEY_EMBED_URL"):
        Settings.load(env_file=None, memory={"PARLEY_EMBEDDER": "openai"})
