"""The `mcpServers` file and tool naming."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent.mcp import McpConfigError, ServerConfig, load_config, tool_name


def write(tmp_path: Path, servers: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_variables_expand_from_the_environment(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "files": {"command": "uvx", "args": ["srv", "--root=${ROOT}"], "env": {"T": "${TOK}"}},
            "crm": {"url": "https://crm.test/mcp", "headers": {"Authorization": "Bearer ${TOK}"}},
        },
    )
    config = load_config(path, {"ROOT": "/srv", "TOK": "s3"})
    files, crm = config.servers["files"], config.servers["crm"]
    assert files.transport == "stdio" and files.args == ["srv", "--root=/srv"]
    assert files.env == {"T": "s3"} and files.approval == "auto"
    assert crm.transport == "http" and crm.headers == {"Authorization": "Bearer s3"}


def test_an_unset_variable_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, {"crm": {"url": "https://x/mcp", "headers": {"A": "${NOPE}"}}})
    with pytest.raises(McpConfigError, match=r"mcpServers\.crm\.headers\.A uses \$\{NOPE\}"):
        load_config(path, {})


@pytest.mark.parametrize(
    ("server", "problem"),
    [
        ({"command": "a", "url": "http://b/mcp"}, "either"),
        ({}, "either"),
        ({"url": "ftp://b"}, "http"),
        ({"command": "a", "approval": "sometimes"}, "approval"),
        ({"command": "a", "allow": ["slack"]}, "platform"),
    ],
)
def test_bad_servers_are_refused(tmp_path: Path, server: dict, problem: str) -> None:
    with pytest.raises(McpConfigError, match=problem):
        load_config(write(tmp_path, {"s": server}), {})


@pytest.mark.parametrize(
    ("entry", "where", "expected"),
    [
        # (platform, chat, user, team)
        ("telegram:42", ("telegram", "42", "42", None), True),  # the person's private chat
        ("telegram:42", ("telegram", "-100", "42", None), False),  # not the person elsewhere
        ("telegram:-100", ("telegram", "-100", "42", None), True),
        ("telegram:user:42", ("telegram", "-100", "42", None), True),
        ("telegram:user:42", ("telegram", "42", "43", None), False),
        ("slack:T1/C1", ("slack", "C1", "U1", "T1"), True),
        ("slack:T1/C1", ("slack", "C1", "U1", "T2"), False),
        ("slack:T1/*", ("slack", "C9", "U1", "T1"), True),
        ("slack:U1234567", ("slack", "D1", "U1234567", "T1"), False),
        ("slack:user:U1234567", ("slack", "C9", "U1234567", "T1"), True),
        ("slack:T1/C1", ("telegram", "C1", "U1", "T1"), False),
    ],
)
def test_allow_entries_name_chats_or_explicitly_people(
    entry: str, where: tuple[str, str, str, str | None], expected: bool
) -> None:
    assert ServerConfig(command="x", allow=[entry]).allows(*where) is expected


def test_keys_of_other_clients_are_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, {"s": {"command": "a", "autoApprove": [], "transportType": "stdio"}})
    assert load_config(path, {}).servers["s"].command == "a"
    assert "MCP server s: ignoring keys Parley does not use: autoApprove, transportType" in (
        caplog.text
    )


@pytest.mark.parametrize(
    ("server", "named"),
    [
        ({"command": "a", "arg": ["x"]}, 'unknown key "arg" (did you mean "args"?)'),
        ({"command": "a", "alow": ["x"]}, 'unknown key "alow" (did you mean "allow"?)'),
        ({"comand": "a"}, 'unknown key "comand" (did you mean "command"?)'),
        ({"url": "http://x/mcp", "Headers": {}}, 'unknown key "Headers" (did you mean "headers"?)'),
    ],
)
def test_a_misspelt_key_is_named_with_the_key_it_resembles(
    tmp_path: Path, server: dict[str, object], named: str
) -> None:
    path = write(tmp_path, {"files": server})
    with pytest.raises(McpConfigError) as caught:
        load_config(path, {})
    assert str(caught.value) == f"{path}: server files: {named}"


@pytest.mark.parametrize("top", ["mcpservers", "mcp_servers", "McpServers"])
def test_a_misspelt_mcp_servers_key_is_an_error_not_zero_servers(tmp_path: Path, top: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({top: {"time": {"command": "uvx"}}}))
    with pytest.raises(McpConfigError) as caught:
        load_config(path, {})
    assert str(caught.value) == (
        f'{path} has no "mcpServers" object; found "{top}": write it as "mcpServers"'
    )
    path.write_text(json.dumps({"servers": {}}))
    with pytest.raises(McpConfigError, match='has no "mcpServers" object$'):
        load_config(path, {})


def test_unreadable_or_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json", {})
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(McpConfigError, match="not valid JSON"):
        load_config(tmp_path / "bad.json", {})


def test_disabled_servers_are_skipped(tmp_path: Path) -> None:
    path = write(tmp_path, {"a": {"command": "x", "disabled": True}, "b": {"command": "y"}})
    assert list(load_config(path, {}).enabled()) == ["b"]


def test_tool_names_fit_the_model_rules_and_stay_distinct() -> None:
    rule = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
    assert tool_name("files", "read_file") == "files__read_file"
    odd = tool_name("my files", "read.file/v2")
    long = tool_name("s" * 40, "t" * 40)
    assert rule.match(odd) and rule.match(long) and len(long) == 64
    assert odd.startswith("my_files__read_file_v2_")
    assert tool_name("a b", "c") != tool_name("a_b", "c")


ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_examples_are_valid(tmp_path: Path) -> None:
    env = {"CRM_TOKEN": "t"}
    example = load_config(ROOT / "deploy" / "mcp-servers.example.json", env)
    assert set(example.servers) == {"time", "crm"}
    readme = (ROOT / "README.md").read_text()
    blocks = [part.split("```", 1)[0] for part in readme.split("```json\n")[1:]]
    block = next(b for b in blocks if '"mcpServers"' in b)  # the README has other JSON too
    documented = load_config(write(tmp_path, json.loads(block)["mcpServers"]), env)
    assert documented.servers["crm"].allow == ["slack:T0123/C0SALES", "telegram:123456789"]
