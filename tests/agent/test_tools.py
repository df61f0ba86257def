from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from agent.builtin_tools import builtin_registry
from agent.protocols import RunContext
from agent.tools import Tool, ToolContext, ToolLoadError, ToolRegistry, tool


@tool(category="weather")
async def forecast(
    ctx: ToolContext, city: str, days: int = 1, unit: Literal["C", "F"] = "C"
) -> str:
    """Weather forecast for a city.

    Longer explanation that is not part of the summary.

    Args:
        city: City name, e.g. Berlin.
        days: How many days ahead,
            counting from today.
        unit: Temperature unit.

    Returns:
        The forecast.
    """
    return f"{ctx.run.user_id}:{city}:{days}:{unit}"


def test_schema_comes_from_type_hints_and_docstring() -> None:
    spec = forecast.spec()
    assert spec.name == "forecast"
    assert spec.description.startswith("Weather forecast for a city.")
    assert "Returns" not in spec.description and "Args" not in spec.description
    schema = spec.input_schema
    assert schema["required"] == ["city"]
    assert set(schema["properties"]) == {"city", "days", "unit"}  # ctx is injected, not shown
    assert schema["properties"]["city"]["type"] == "string"
    assert schema["properties"]["city"]["description"] == "City name, e.g. Berlin."
    assert schema["properties"]["days"] == {
        "default": 1,
        "description": "How many days ahead, counting from today.",
        "title": "Days",
        "type": "integer",
    }
    assert schema["properties"]["unit"]["enum"] == ["C", "F"]
    assert schema["additionalProperties"] is False


async def google(city: str, days: int = 1) -> str:
    """Weather for a city.

    Args:
        city (str): City name,
            e.g. Berlin.
        days: How many days ahead.

    Returns:
        The forecast.
    """
    return city


async def numpy(city: str, days: int = 1) -> str:
    """Weather for a city.

    Parameters
    ----------
    city : str
        City name,
        e.g. Berlin.
    days : int, optional
        How many days ahead.

    Returns
    -------
    str
        The forecast.
    """
    return city


async def rest(city: str, days: int = 1) -> str:
    """Weather for a city.

    :param city: City name,
        e.g. Berlin.
    :param days: How many days ahead.
    :returns: The forecast.
    """
    return city


@pytest.mark.parametrize("fn", [google, numpy, rest], ids=["google", "numpy", "rest"])
def test_parameter_descriptions_come_from_any_docstring_style(fn: Any) -> None:
    spec = tool(fn).spec()
    assert spec.description == "Weather for a city."
    properties = spec.input_schema["properties"]
    assert properties["city"]["description"] == "City name, e.g. Berlin."
    assert properties["days"]["description"] == "How many days ahead."


async def test_call_validates_and_injects_context(ctx: RunContext) -> None:
    assert await forecast({"city": "Oslo", "days": "3"}, ToolContext(run=ctx)) == "42:Oslo:3:C"
    with pytest.raises(ValidationError):
        await forecast({"city": "Oslo", "unit": "K"}, ToolContext(run=ctx))
    with pytest.raises(ValidationError):
        await forecast({"town": "Oslo"}, ToolContext(run=ctx))


def test_metadata_and_describe() -> None:
    @tool(name="send_mail", side_effects=True, timeout=5, retries=0, category="mail")
    async def send(to: str, body: str) -> str:
        """Send an e-mail."""
        return "sent"

    assert isinstance(send, Tool)
    assert (send.name, send.side_effects, send.timeout, send.retries, send.category) == (
        "send_mail",
        True,
        5,
        0,
        "mail",
    )
    assert send.describe_call({"to": "bob@example.com", "body": "hi"}) == (
        "send mail(to='bob@example.com', body='hi')"
    )

    @tool(describe=lambda args: f"Email {args['to']}")
    async def mail(to: str) -> str:
        return to

    assert mail.describe_call({"to": "bob"}) == "Email bob"
    assert mail.description == "mail"  # no docstring: the name stands in


def test_sync_functions_and_bad_names_are_rejected() -> None:
    def sync(x: int) -> int:
        return x

    with pytest.raises(TypeError):
        tool(sync)  # type: ignore[arg-type]

    async def fine(x: int) -> int:
        return x

    with pytest.raises(ValueError):
        tool(name="has space")(fine)


def test_registry_register_get_list_has_and_duplicates() -> None:
    registry = builtin_registry()
    assert registry.has("calculator") and "ask_user" in registry
    assert not registry.has("forecast")
    registry.register(forecast)
    assert registry.get("forecast") is forecast
    assert [t.name for t in registry.tools("weather")] == ["forecast"]
    assert {t.name for t in registry.tools("memory")} == {
        "remember",
        "list_memories",
        "memory_sources",
        "forget",
    }
    assert len(registry.specs()) == len(registry.tools()) == 13
    with pytest.raises(ValueError, match="already registered"):
        registry.register(forecast)


def test_registry_specs_are_built_once_per_version() -> None:
    registry = builtin_registry()
    specs, version = registry.specs(), registry.version
    assert registry.specs() is specs  # the hot path reuses them
    registry.register(forecast)
    assert registry.version == version + 1
    assert [s.name for s in registry.specs()] == [*(s.name for s in specs), "forecast"]
    with pytest.raises(KeyError):
        registry.get("nope")


def test_skills_dir_loading(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text(
        textwrap.dedent(
            '''
            from agent.tools import tool

            @tool(category="skills")
            async def greet(name: str) -> str:
                """Greet someone."""
                return f"hello {name}"

            @tool(side_effects=True)
            async def wave(times: int) -> str:
                """Wave at the user."""
                return "wave " * times

            NOT_A_TOOL = 3
            '''
        )
    )
    (tmp_path / "_private.py").write_text("raise RuntimeError('never imported')\n")
    registry = ToolRegistry()
    assert registry.load_skills_dir(tmp_path) == ["greet", "wave"]
    assert registry.get("wave").side_effects
    assert registry.get("greet").category == "skills"


def test_broken_skill_file_is_reported(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import does_not_exist_anywhere\n")
    with pytest.raises(ToolLoadError, match="broken.py"):
        ToolRegistry().load_skills_dir(tmp_path)
    with pytest.raises(ToolLoadError):
        ToolRegistry().load_skills_dir(tmp_path / "missing")


def test_entry_point_loading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An installed distribution as importlib.metadata finds it: a module plus a dist-info
    # folder declaring entry points in the `parley.tools` group.
    (tmp_path / "parley_extra_tools.py").write_text(
        textwrap.dedent(
            '''
            from agent.tools import tool

            @tool
            async def shout(text: str) -> str:
                """Upper-case the text."""
                return text.upper()

            @tool
            async def whisper(text: str) -> str:
                """Lower-case the text."""
                return text.lower()

            BUNDLE = [whisper]
            '''
        )
    )
    info = tmp_path / "parley_extra_tools-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: parley-extra-tools\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[parley.tools]\nshout = parley_extra_tools:shout\nbundle = parley_extra_tools:BUNDLE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "parley_extra_tools", raising=False)
    registry = ToolRegistry()
    assert sorted(registry.load_entry_points()) == ["shout", "whisper"]
    assert registry.load_entry_points("parley.nothing_here") == []
