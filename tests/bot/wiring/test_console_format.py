"""The console prints the model's Markdown as terminal text, once, as it streams."""

from __future__ import annotations

import io

import pytest

from bot.wiring.console_format import BOLD, PLAIN, terminal_text
from bot.wiring.console_view import ConsoleView

MARKDOWN = (
    "## Plan\n\nHere is **the** plan, in `two` steps:\n\n- step *one*\n- step two\n\n"
    "| name | size |\n|---|---|\n| a | 1 |\n| longer | 22 |\n\n"
    "```sh\nmake run\n```\n\n> quoted\n\nSee [the docs](https://example.org/docs)."
)
TERMINAL = (
    "Plan\n\nHere is the plan, in two steps:\n\n• step one\n• step two\n\n"
    "name   | size\n-------+-----\na      | 1\nlonger | 22\n\n"
    "    make run\n\n│ quoted\n\nSee the docs (https://example.org/docs)."
)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


async def streamed(view: ConsoleView, answer: str, cuts: list[int]) -> None:
    for cut in cuts:
        await view.show(answer[:cut])
    await view.finish(answer)


def test_markdown_becomes_plain_terminal_text() -> None:
    assert terminal_text(MARKDOWN) == TERMINAL
    assert terminal_text("**bold** and # not a heading") == "bold and # not a heading"


def test_a_terminal_shows_emphasis_and_headings_in_bold() -> None:
    assert (
        terminal_text("# Title\n\n**now**", ansi=True) == f"{BOLD}Title{PLAIN}\n\n{BOLD}now{PLAIN}"
    )


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 13, 64])
async def test_a_streamed_markdown_answer_is_printed_once_rendered(step: int) -> None:
    out = io.StringIO()
    view = ConsoleView(out=out)
    await streamed(view, MARKDOWN, list(range(step, len(MARKDOWN), step)))
    assert out.getvalue() == f"parley> {TERMINAL}\n"


async def test_chunks_that_end_on_a_space_do_not_double_it() -> None:
    """Each update ends on a space (as a model's deltas often do): no space is doubled."""
    answer = "Six times seven is 42, as the calculator confirms."
    words = [i + 1 for i, c in enumerate(answer) if c == " "]
    out = io.StringIO()
    await streamed(ConsoleView(out=out), answer, words)
    assert out.getvalue() == f"parley> {answer}\n"


async def test_prose_streams_word_by_word_before_its_line_ends() -> None:
    out = io.StringIO()
    view = ConsoleView(out=out)
    await view.show("The answer is forty")
    assert out.getvalue() == "parley> The answer is"  # "forty" may still grow
    await view.show("The answer is forty-two, **certai")
    assert out.getvalue() == "parley> The answer is forty-two,"  # markup: wait for it
    await view.finish("The answer is forty-two, **certainly**.")
    assert out.getvalue() == "parley> The answer is forty-two, certainly.\n"


async def test_a_growing_table_waits_until_its_columns_are_known() -> None:
    out = io.StringIO()
    view = ConsoleView(out=out)
    await view.show("Sizes:\n\n| a | 1 |\n|---|---|\n| b | 2 |\n")
    assert out.getvalue() == "parley> Sizes:"
    await streamed(view, "Sizes:\n\n| a | 1 |\n|---|---|\n| longer | 22 |\n\nDone.", [])
    assert out.getvalue() == "parley> Sizes:\n\na      | 1\n-------+---\nlonger | 22\n\nDone.\n"


async def test_an_answer_that_reads_differently_at_the_end_is_printed_anew() -> None:
    """Emphasis that closes on a later line changes how printed text looks: the final answer
    is printed whole on its own line rather than left half raw."""
    out = Tty()
    view = ConsoleView(out=out)
    await view.show("**starts here\n")
    await view.finish("**starts here\nends here**")
    assert out.getvalue().endswith(f"parley> {BOLD}starts here\nends here{PLAIN}\n")


async def test_plain_messages_and_questions_are_rendered_too() -> None:
    from adapters.base import Button, ConversationKey, OutboundMessage
    from bot.wiring.console_view import ConsoleAdapter

    out = io.StringIO()
    adapter = ConsoleAdapter(view=ConsoleView(out=out))
    where = ConversationKey(platform="console", chat_id="local")
    await adapter.send(where, OutboundMessage(text="**Saved.** See `/memories`."))
    question = OutboundMessage(
        text="Which *one*?", buttons=[Button(label="Tea", value="0")], decision_id="d1"
    )
    await adapter.send(where, question)
    assert out.getvalue() == "parley> Saved. See /memories.\nparley asks> Which one?\n  1. Tea\n"
