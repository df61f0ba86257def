"""Questions about everything remembered ("what do you know about me?").

Such a question is about no memory in particular, so by similarity it is far from all of
them (0.8–0.95 cosine distance). Recall recognises it and answers with the newest memories
instead: in English by its closeness to a few such questions; in other languages, which the
packaged English model embeds poorly, by a table of phrasings per language. A phrasing
counts only when it is nearly the whole query (a few words of politeness aside), so "what
do you know about me and Kubernetes" still searches.
"""

from __future__ import annotations

import asyncio
import re

import numpy as np

from memory.embedders import Embedder

EXAMPLES = [
    "what do you know about me?",
    "what do you remember about me?",
    "what have I told you about myself?",
    "tell me everything you remember",
    "what do you remember?",
    "what things have you memorised?",
    "show me what you know about us",
    "what do you know about our team?",
    "list what you remember",
    "what have you stored about me?",
]

# Per language, ways to ask what Parley knows, remembers or has stored about the asker or
# their team; matched on lower-case text without punctuation, hyphens as spaces.
_ME_DE = r"(über (mich|uns|unser team)|von (mir|uns))"
_ME_FR = r"(de|sur|à propos de) (moi|nous|notre équipe)"
_ME_ES = r"(de|sobre|acerca de) (m[ií]|nosotros|nuestro equipo)"
_ME_PT = r"(sobre|de|a respeito de) (mim|n[oó]s|nossa equipe)"
_ME_IT = r"(di|su|su di|riguardo a) (me|noi|il nostro team)"
_ME_RU = r"(обо мне|о нас|про меня|про нас|о нашей команде)"
_ME_UK = r"(про мене|про нас|о мені|про нашу команду)"
_KNOW_RU = r"(знаешь|знаете|помнишь|помните|запомнил|запомнила|запомнили)"
_KNOW_UK = r"(знаєш|знаєте|пам'ятаєш|пам'ятаєте|запам'ятав|запам'ятала|запам'ятали)"
PHRASES: dict[str, tuple[str, ...]] = {
    "de": (
        rf"was (weißt|weisst|wisst) (du|ihr) (alles |noch )?{_ME_DE}",
        rf"was hast du (dir )?(alles )?({_ME_DE} )?(gemerkt|gespeichert)",
        rf"woran erinnerst du dich( {_ME_DE})?",
        rf"was (merkst|speicherst) du (dir )?{_ME_DE}",
    ),
    "fr": (
        rf"(que|qu'est ce que) (sais tu|savez vous|tu sais|vous savez) {_ME_FR}",
        r"(de quoi|qu'est ce dont) (te souviens tu|vous souvenez vous|tu te souviens)",
        r"tu te souviens de quoi",
        rf"(qu'as tu|qu'avez vous|qu'est ce que (tu as|vous avez)) "
        rf"(retenu|mémorisé|enregistré|gardé en mémoire)( {_ME_FR})?",
    ),
    "es": (
        rf"qu[eé] (sabes|sabe usted|sab[eé]is|recuerdas|recuerda usted) {_ME_ES}",
        r"qu[eé] (recuerdas|recuerda usted)",
        rf"qu[eé] (has|ha) (guardado|memorizado|recordado|aprendido)( {_ME_ES})?",
    ),
    "pt": (
        rf"(o )?qu[eê] (voc[eê] |tu )?(sabe|sabes|lembra|lembras|recorda|recordas) {_ME_PT}",
        r"do qu[eê] (voc[eê] |tu )?(se lembra|te lembras|lembra|lembras)",
        rf"(o )?qu[eê] (voc[eê] |tu )?(guardou|guardaste|memorizou|memorizaste)( {_ME_PT})?",
    ),
    "it": (
        rf"(che cosa|cosa|che) (sai|sapete|ricordi|ti ricordi|vi ricordate) {_ME_IT}",
        r"(che cosa|cosa) ti ricordi",
        rf"(che cosa|cosa) (hai|avete) (memorizzato|salvato|ricordato)( {_ME_IT})?",
    ),
    "ru": (
        rf"что (ты|вы) {_KNOW_RU} {_ME_RU}",
        rf"что (ты|вы) {_ME_RU} {_KNOW_RU}",
        r"что (ты|вы) (помнишь|помните|запомнил|запомнила|запомнили)",
    ),
    "uk": (
        rf"що (ти|ви) {_KNOW_UK} {_ME_UK}",
        rf"що (ти|ви) {_ME_UK} {_KNOW_UK}",
        r"що (ти|ви) (пам'ятаєш|пам'ятаєте|запам'ятав|запам'ятала|запам'ятали)",
    ),
}
_PATTERNS = {
    language: re.compile(r"(?<!\w)(?:" + "|".join(f"(?:{p})" for p in phrases) + r")(?!\w)")
    for language, phrases in PHRASES.items()
}
EXTRA_WORDS = 3  # politeness and address ("bitte", "s'il te plaît", "Parley") around it
_APOSTROPHES = re.compile(r"[’ʼ`´]")
_NOT_WORD = re.compile(r"[^\w']+")


def normalise(text: str) -> str:
    text = _APOSTROPHES.sub("'", text.casefold()).replace("ё", "е")
    return " ".join(_NOT_WORD.sub(" ", text).split())


def phrase_language(text: str) -> str | None:
    """The language whose phrasing of a generic question is (nearly) the whole text."""
    if len(text) > 300:  # a whole task, not a question about memory
        return None
    plain = normalise(text)
    for language, pattern in _PATTERNS.items():
        for found in pattern.finditer(plain):
            rest = plain[: found.start()] + " " + plain[found.end() :]
            if len(rest.split()) <= EXTRA_WORDS:
                return language
    return None


class GenericQuestions:
    def __init__(self, embedder: Embedder, max_distance: float) -> None:
        self.embedder = embedder
        self.max_distance = max_distance
        self._examples: np.ndarray | None = None
        self._lock = asyncio.Lock()

    async def distance(self, vector: list[float]) -> float:
        """Cosine distance from the vector to the closest example question."""
        if self._examples is None:
            async with self._lock:
                if self._examples is None:
                    examples = np.asarray(await self.embedder.embed_queries(EXAMPLES), np.float32)
                    self._examples = examples / np.linalg.norm(examples, axis=1, keepdims=True)
        query = np.asarray(vector, dtype=np.float32)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        return float(1.0 - np.max(self._examples @ query))

    def phrased(self, query: str) -> bool:
        """A generic question in one of the tabled languages (no embedding needed)."""
        return self.max_distance > 0 and phrase_language(query) is not None

    async def matches(self, vector: list[float]) -> bool:
        return self.max_distance > 0 and await self.distance(vector) <= self.max_distance
