"""The engine's shape beside its rules: which decision an event concerns, and that the
executor handles every effect `decide` can return."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from adapters.base import Actor, ConversationKey, InboundAction, InboundKind, InboundMessage
from bot.conversation import effects as fx
from bot.conversation.engine import pending_id
from bot.conversation.executor import Executor
from bot.conversation.render import MEMORY_ACTION
from bot.features.connections.commands import CONNECTION_ACTION
from bot.features.schedules.commands import SCHEDULE_ACTION
from bot.runtime.sessions import Session

GROUP = ConversationKey(platform="slack", chat_id="C1", team_id="T1")
ANA = Actor(platform="slack", user_id="U1", name="Ana")
WAITING = Session(status="awaiting_approval", decision_id="D1")


def said(
    text: str = "hi", command: str | None = None, kind: InboundKind = "text"
) -> InboundMessage:
    return InboundMessage(
        event_id="e1",
        conversation=GROUP,
        actor=ANA,
        text=text,
        is_direct=False,
        command=command,
        kind=kind,
    )


def pressed(decision_id: str) -> InboundAction:
    return InboundAction(
        event_id="e2", conversation=GROUP, actor=ANA, decision_id=decision_id, choice="approve"
    )


@pytest.mark.parametrize(
    ("event", "concerns"),
    [
        (said("yes"), "D1"),  # a plain message may answer or decide it
        (said(command="cancel"), "D1"),
        (said(command="CANCEL"), "D1"),
        (said(kind="connected"), "D1"),  # a connected account resumes its run
        (said(command="help"), None),
        (said(command="memories"), None),
        (said(kind="non_text"), None),
        (said(kind="bare_mention"), None),
        (said(kind="scheduled"), None),  # Parley's own objectives never decide a plan
        (pressed("D7"), "D7"),  # a press is about its own decision, not the session's
        (pressed(MEMORY_ACTION), None),
        (pressed(SCHEDULE_ACTION), None),
        (pressed(CONNECTION_ACTION), None),
    ],
)
def test_which_decision_an_event_concerns(
    event: InboundMessage | InboundAction, concerns: str | None
) -> None:
    assert pending_id(WAITING, event) == concerns


def test_a_message_concerns_no_decision_when_none_waits() -> None:
    assert pending_id(Session(), said("yes")) is None
    assert pending_id(Session(), said(command="cancel")) is None


async def test_an_effect_the_executor_does_not_know_fails_loudly() -> None:
    """mypy refuses a core effect type with no case (what reaches `_feature` must be a
    feature's), and one that slips through anyway stops the entry instead of being ignored."""
    turn = SimpleNamespace(session=Session(), reply=None, received=None)
    executor = SimpleNamespace(_handlers={})
    executor._feature = lambda turn, effect: Executor._feature(cast(Any, executor), turn, effect)
    with pytest.raises(AssertionError):
        await Executor._perform(cast(Any, executor), cast(Any, turn), cast(Any, object()))


def test_the_executor_has_a_case_for_every_effect_type() -> None:
    tree = ast.parse(inspect.getsource(Executor._perform).strip().replace("\n    ", "\n"))
    handled = {
        node.cls.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.MatchClass) and isinstance(node.cls, ast.Attribute)
    }
    # a feature's effects are carried out by the feature that brings them (seam.py)
    brought = {kind.__name__ for kind in typing.get_args(fx.FeatureEffect)}
    every = {kind.__name__ for kind in typing.get_args(fx.Effect)} - brought
    assert every - handled == set() and not handled & brought


ROOT = Path(__file__).resolve().parents[3]
# Where Parley's sentences live: the engine's module and its book of sentences (texts.py),
# which the modules that say them import by name.
SENTENCES = ("bot/conversation/engine.py", "bot/conversation/texts.py")
# Modules that still say something themselves, each with its reason.
SAYS_ITS_OWN = {
    # below the conversation layer (it cannot import texts.py): the sign-in's web page, read
    # in a browser, and the connected event's text, which the model reads as the person's
    "bot/features/connections/callback.py",
}
SAYS_NOTHING = sorted(
    str(path.relative_to(ROOT))
    for package in ("bot/conversation", "bot/runtime")
    for path in (ROOT / package).glob("*.py")
    if str(path.relative_to(ROOT)) not in (*SENTENCES, *SAYS_ITS_OWN)
)


def sentences_in(path: Path) -> list[str]:
    """String literals, f-strings included, that read like something said to a person: not
    docstrings, and not what goes to a log, into an exception or an assertion."""
    tree = ast.parse(path.read_text())
    quiet: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            quiet.add(id(body[0].value))  # a docstring
        logged = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if (
            (logged and node.func.attr in LOG_CALLS)  # type: ignore[union-attr]
            or isinstance(node, (ast.Raise, ast.Assert))
        ):
            quiet.update(id(inner) for inner in ast.walk(node))
    found = []
    for node in ast.walk(tree):
        if id(node) in quiet:
            continue
        if isinstance(node, ast.JoinedStr):  # an f-string: its words, a value as {}
            parts = (v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            quiet.update(id(v) for v in node.values)
            text = "".join(str(part) for part in parts)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        # a capital to a full stop (or an ellipsis), after an emoji that may lead the line
        if re.search(r"^([^\w\s{]+ )?[A-Z][a-z']*( [^\n]*)?(\w[.!?…]|…)$", text.strip()):
            found.append(text)
    return found


LOG_CALLS = {"debug", "info", "warning", "error", "exception", "critical"}


@pytest.mark.parametrize("module", SAYS_NOTHING)
def test_every_sentence_parley_says_is_the_engines(module: str) -> None:
    assert sentences_in(ROOT / module) == []


def test_the_sentence_finder_sees_what_it_should(tmp_path: Path) -> None:
    """The finder catches a sentence written in place, an f-string one too, and passes over
    docstrings, log lines, exceptions and assertions; the scan covers every module but the
    sentences' own and those kept out with their reason."""
    module = tmp_path / "m.py"
    module.write_text(
        "def f(n, log):\n"
        '    """Say it."""\n'
        '    log.info("Not said to anyone.")\n'
        '    assert n, f"Not said {n} either."\n'
        '    said = f"Forgot {n} things."\n'
        '    return "Forgotten." if n else said or f"⌛ Expired {n} times."\n'
    )
    assert sorted(sentences_in(module)) == [
        "Forgot {} things.",
        "Forgotten.",
        "⌛ Expired {} times.",
    ]
    assert "This sign-in link is not valid." in sentences_in(
        ROOT / "bot/features/connections/callback.py"
    )
    assert "bot/conversation/commands.py" in SAYS_NOTHING
    assert "bot/runtime/streaming.py" in SAYS_NOTHING
    assert len(sentences_in(ROOT / "bot/conversation/texts.py")) > 40
