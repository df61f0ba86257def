""" "What do you know about me?" in the languages of a team, not only in English."""

from __future__ import annotations

import pytest

from memory import RedisMemoryStore
from memory.generic import GenericQuestions, phrase_language
from tests.memory.test_store import ANA_DM, BOB_DM, BOB_IN_CHANNEL

ASKED = {
    "de": [
        "Was weißt du über mich?",
        "Was weisst du alles über uns?",
        "Was hast du dir über mich gemerkt?",
        "Woran erinnerst du dich?",
        "Parley, was weißt du von mir?",
    ],
    "fr": [
        "Que sais-tu de moi ?",
        "Qu’est-ce que tu sais sur moi ?",
        "Que savez-vous sur nous, s'il vous plaît ?",
        "De quoi te souviens-tu ?",
        "Qu'as-tu retenu à propos de moi ?",
    ],
    "es": [
        "¿Qué sabes de mí?",
        "que sabes sobre mi",
        "¿Qué recuerdas acerca de nosotros?",
        "¿Qué has guardado sobre mí?",
    ],
    "pt": [
        "O que você sabe sobre mim?",
        "O que sabes de mim?",
        "Do que você se lembra?",
        "O que você memorizou sobre nós?",
    ],
    "it": [
        "Cosa sai di me?",
        "Che cosa sai su di me?",
        "Cosa ti ricordi di noi?",
        "Che cosa hai memorizzato su di me?",
    ],
    "ru": [
        "Что ты знаешь обо мне?",
        "Что вы обо мне знаете?",
        "Что ты помнишь про нас?",
        "Что ты запомнил обо мне, пожалуйста?",
    ],
    "uk": [
        "Що ти знаєш про мене?",
        "Що ви про нас знаєте?",
        "Що ти пам’ятаєш про мене?",
        "Що ти запам'ятав?",
    ],
}

SPECIFIC = [  # questions about something in particular: recall must search for them
    "Was weißt du über Kubernetes?",
    "Was weißt du über mich und meinen Urlaub im Juli in Italien?",
    "Que sais-tu de Paris ?",
    "¿Qué sabes de la reunión del martes?",
    "O que você sabe sobre o projeto Atlas?",
    "Cosa sai di Roma?",
    "Что ты знаешь о Python?",
    "Що ти знаєш про Київ?",
    "What's my dog called?",
    "Erinnere mich morgen an das Meeting",
]


@pytest.mark.parametrize("language", sorted(ASKED))
def test_generic_questions_are_recognised_in_each_language(language: str) -> None:
    for question in ASKED[language]:
        assert phrase_language(question) == language, question


@pytest.mark.parametrize("question", SPECIFIC)
def test_specific_questions_are_not_taken_for_generic_ones(question: str) -> None:
    assert phrase_language(question) is None


async def test_a_german_speaker_asking_what_parley_knows_gets_the_newest_memories(
    store: RedisMemoryStore,
) -> None:
    facts = ["Mein Hund heißt Bruno", "Ich arbeite im Team Plattform", "Ich trinke keinen Kaffee"]
    for fact in facts:
        await store.remember(fact, ANA_DM)
    await store.remember("Bob mag Jazz", BOB_DM)
    await store.remember("Das Deployment ist dienstags", BOB_IN_CHANNEL)
    found = await store.recall("Was weißt du über mich?", ANA_DM)
    assert [m.text for m in found] == facts[::-1]  # newest first, nobody else's
    assert await store.recall("Что ты знаешь обо мне?", ANA_DM) == found
    # with generic detection switched off (distance 0) it is an ordinary search
    assert not GenericQuestions(store.embedder, 0.0).phrased("Was weißt du über mich?")
