"""The `mcpServers` file: the format Claude Desktop, Cursor and others share, plus Parley's keys.

    {"mcpServers": {
        "files": {"command": "uvx", "args": ["mcp-server-git"], "env": {"TOKEN": "${GIT_TOKEN}"}},
        "crm":   {"url": "https://crm.example/mcp", "headers": {"Authorization": "Bearer ${CRM}"},
                  "tools": ["find_customer"], "approval": "always", "timeout": 20,
                  "allow": ["slack:T123/C456", "telegram:42"]},
        "tracker": {"url": "https://tracker.example/mcp", "auth": "user", "standing": true}
    }}

`"auth": "user"` makes each requester connect their own account (agent/mcp/user.py).
`"standing": true` lets a person approve one of the server's tools for good ("Always for this
tool"), as long as the tool stays as it was shown. `"protocol": "2026-07-28"` tries that MCP
revision first instead of 2025-11-25 (agent/mcp/revision.py).

`${VAR}` in any string expands from the environment, so secrets stay out of the file; an
unset variable is an error that names it.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

log = logging.getLogger(__name__)

Approval = Literal["auto", "always", "never"]
# the MCP revision tried first; the other when the server refuses it (agent/mcp/revision.py)
Revision = Literal["2025-11-25", "2026-07-28"]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# "<platform>:<chat>", "<platform>:<team>/<chat>" (chat may be *), "<platform>:user:<id>"
_ALLOW = re.compile(r"^[a-z]+:(user:[^\s/:]+|[^\s/:]+(/[^\s/:]+)?)$")
_SECRET = re.compile(r"auth|key|token|secret|passw|cookie|credential|sig", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class Timing:
    """How long the client waits on servers (from PARLEY_MCP_* settings)."""

    start_timeout: float = 20.0
    call_timeout: float = 60.0
    retry_base: float = 1.0
    retry_max: float = 300.0
    ping_interval: float = 30.0
    stop_timeout: float = 10.0  # the SDK gives a stdio server 2 s after EOF, then 2 s after SIGTERM
    question_wait: float = 600.0  # a 2025-11-25 call stays open this long for an answer


class McpConfigError(ValueError):
    """The MCP configuration file cannot be used; the message says where and why."""


class ServerConfig(BaseModel):
    """One server: stdio (`command`) or Streamable HTTP (`url`).

    Keys other clients write into the same file (`autoApprove`, `transportType`, ...) are
    ignored with a warning, so one file can serve several clients.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    tools: list[str] | None = None  # an allowlist of the server's tool names
    exclude: list[str] = Field(default_factory=list)
    timeout: float | None = Field(None, gt=0)  # seconds per call; the global default if unset
    approval: Approval = "auto"
    allow: list[str] | None = None  # conversations offered this server's tools; all if unset
    type: str | None = None  # "stdio", "http", ...: the transport follows command / url
    disabled: bool = False
    # "user": each requester connects their own account (MCP authorization, OAuth with PKCE);
    # `client_id` (and `client_secret`) when the server does not offer dynamic registration.
    auth: Literal["user"] | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scope: str | None = None
    # True: the approval prompt for this server's tools offers **Always for this tool**
    # (a standing approval, bot/features/standing.py).
    standing: bool = False
    protocol: Revision = "2025-11-25"

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError('give either "command" (stdio) or "url" (Streamable HTTP)')
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError('"url" must start with http:// or https://')
        if self.auth == "user" and self.url is None:
            raise ValueError('"auth": "user" needs a Streamable HTTP server ("url")')
        return self

    @field_validator("allow")
    @classmethod
    def _allow_entries(cls, value: list[str] | None) -> list[str] | None:
        for entry in value or []:
            if not _ALLOW.match(entry):
                raise ValueError(
                    f'{entry!r} is not "<platform>:<chat id>", "<platform>:<team>/<chat>" '
                    'or "<platform>:user:<user id>"'
                )
        return value

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def offers(self, name: str) -> bool:
        """Whether a tool of this server passes the allowlist and the exclusions."""
        return (self.tools is None or name in self.tools) and name not in self.exclude

    def allows(self, platform: str, chat_id: str, user_id: str, team_id: str | None) -> bool:
        """Whether a conversation may use this server's tools.

        A bare id names a chat and only that chat, never a person: `telegram:42` is the
        private chat with user 42, not user 42 in every group (where everyone would see what
        the tools return). `<platform>:user:<id>` names a person wherever they ask."""
        if self.allow is None:
            return True
        for entry in self.allow:
            where, _, target = entry.partition(":")
            if where != platform:
                continue
            kind, _, person = target.partition(":")
            if kind == "user" and person:
                if person == user_id:
                    return True
                continue
            team, _, chat = target.rpartition("/")
            if team and team != team_id:
                continue
            if chat in ("*", chat_id):
                return True
        return False


class McpConfig(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    servers: dict[str, ServerConfig] = Field(default_factory=dict, alias="mcpServers")

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in value:
            if not name.strip():
                raise ValueError("a server name must not be empty")
        return value

    def enabled(self) -> dict[str, ServerConfig]:
        return {name: server for name, server in self.servers.items() if not server.disabled}


def expand(value: Any, environ: Mapping[str, str], where: str = "") -> Any:
    """`value` with every `${VAR}` in its strings replaced from `environ`."""
    if isinstance(value, str):

        def lookup(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise McpConfigError(f"{where or 'a value'} uses ${{{name}}}, which is not set")
            return environ[name]

        return _VARIABLE.sub(lookup, value)
    if isinstance(value, list):
        return [expand(item, environ, where) for item in value]
    if isinstance(value, dict):
        return {
            key: expand(item, environ, f"{where}.{key}" if where else key)
            for key, item in value.items()
        }
    return value


def secrets_in(path: str | Path, environ: Mapping[str, str] | None = None) -> list[str]:
    """The secrets an `mcpServers` file hands its servers, for redaction: every `${VAR}` it
    uses, and its headers, env values, URL passwords and query values as written. A file that
    cannot be read gives none (loading it reports that)."""
    environ = os.environ if environ is None else environ
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        servers = dict(raw.get("mcpServers") or {})
    except (OSError, ValueError, AttributeError, TypeError):
        return []
    found = [environ[name] for name in _VARIABLE.findall(json.dumps(raw)) if name in environ]
    for server in servers.values():
        if not isinstance(server, dict):
            continue
        for key in ("headers", "env"):
            found += [str(v) for k, v in dict(server.get(key) or {}).items() if _SECRET.search(k)]
        url = urlsplit(expand(str(server.get("url") or ""), _Blank()))
        found += [url.password or ""]
        found += [v for k, v in parse_qsl(url.query) if _SECRET.search(k)]
    return [value for value in found if value and "${" not in value]


def _meant(key: str, known: Iterable[str]) -> str | None:
    """The known key `key` was probably meant to be: the same but for case, or one or two
    letters away."""
    for candidate in known:
        if key.lower() == candidate.lower():
            return candidate
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return close[0] if close else None


def _misspelt(server: Mapping[str, Any]) -> str:
    """A server's keys that look like a misspelling of one of Parley's keys, named (keys other
    clients write, like "autoApprove", resemble none and are left to the warning)."""
    known = ServerConfig.model_fields
    typos = [
        f'unknown key "{key}" (did you mean "{meant}"?)'
        for key in server
        if key not in known and (meant := _meant(key, known))
    ]
    return "; ".join(typos)


class _Blank(dict[str, str]):
    """An environment in which every variable is set and empty (for reading a URL's parts)."""

    def __contains__(self, key: object) -> bool:
        return True

    def __missing__(self, key: str) -> str:
        return ""


def shown_url(url: str) -> str:
    """A server URL as operators may see it: no user, password, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> McpConfig:
    """Read, expand and validate an `mcpServers` file; raise McpConfigError on any problem."""
    file = Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise McpConfigError(f"cannot read {file}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise McpConfigError(f"{file} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("mcpServers", {}), dict):
        raise McpConfigError(f'{file} must hold an object with an "mcpServers" object')
    if "mcpServers" not in raw:  # a misspelt "mcpservers" would otherwise mean no servers
        near = [f'"{key}"' for key in raw if _meant(key, ["mcpServers"])]
        found = f'; found {", ".join(near)}: write it as "mcpServers"' if near else ""
        raise McpConfigError(f'{file} has no "mcpServers" object{found}')
    for name, server in raw["mcpServers"].items():
        if isinstance(server, dict) and (typos := _misspelt(server)):
            raise McpConfigError(f"{file}: server {name}: {typos}")
    expanded = expand(raw, os.environ if environ is None else environ)
    try:
        config = McpConfig.model_validate(expanded)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors()
        )
        raise McpConfigError(f"{file}: {problems}") from None
    for name, server in config.servers.items():
        if server.model_extra:
            log.warning(
                "MCP server %s: ignoring keys Parley does not use: %s",
                name,
                ", ".join(sorted(server.model_extra)),
            )
    return config
