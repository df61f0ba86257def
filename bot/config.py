"""Parley's settings: one object, read from the environment and `.env`.

Platform and provider credentials keep the names their ecosystems use (`SLACK_BOT_TOKEN`,
`ANTHROPIC_API_KEY`, ...); Parley's own knobs start with `PARLEY_`. Every field's alias is the
environment variable it reads, so a validation error names the variable to fix. Every
variable is listed, with its default, in `.env.example`.
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from dotenv.parser import parse_stream
from pydantic import (
    AliasChoices,
    BaseModel,
    DirectoryPath,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

CommaList = Annotated[list[str], NoDecode]


def _split_commas(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _a_file_not_json(value: Any) -> Any:
    """A setting that names a JSON file, given the JSON itself: say so at load."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        raise ValueError("names a JSON file; put the JSON in a file and set its path")
    return value


def _url(*schemes: str, example: str) -> Any:
    """A validator for a URL setting: it must start with one of `schemes` (say which, and how
    the value should look, rather than fail later inside a client with a traceback)."""

    def check(value: Any) -> Any:
        if not isinstance(value, str) or not value:
            return value
        scheme, found, _ = value.partition("://")
        if not found:
            raise ValueError(f"needs a scheme, e.g. {example}")
        if scheme.lower() not in schemes:
            names = [f"{s}://" for s in schemes]
            allowed = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
            raise ValueError(f"must start with {allowed}, e.g. {example}")
        return value

    return check


_SECRET_NAME = re.compile(r"TOKEN|SECRET|KEY|PASSWORD", re.IGNORECASE)


class ConfigError(Exception):
    """The configuration cannot be used; the message names the variables at fault."""


class _Section(BaseSettings):
    model_config = SettingsConfigDict(
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
        populate_by_name=True,
        frozen=True,
    )


class RedisSettings(_Section):
    url: str | None = Field(None, alias="REDIS_URL")
    # Redis is the trust root (whoever writes to it can forge approvals): production servers
    # ask for a password; one in REDIS_URL (`redis://:pw@host`) wins over this one.
    password: SecretStr | None = Field(None, alias="REDIS_PASSWORD")

    @property
    def password_text(self) -> str | None:
        return self.password.get_secret_value() if self.password is not None else None

    data_dir: Path = Field(Path(".parley"), alias="PARLEY_DATA_DIR")
    server: Path | None = Field(None, alias="PARLEY_REDIS_SERVER")
    key_prefix: str = Field("parley", alias="PARLEY_REDIS_PREFIX", pattern=r"^[A-Za-z0-9_.-]+$")
    max_connections: int = Field(100, alias="PARLEY_REDIS_MAX_CONNECTIONS", ge=2)
    pool_timeout: float = Field(10.0, alias="PARLEY_REDIS_POOL_TIMEOUT", gt=0)

    _scheme = field_validator("url", mode="before")(
        _url("redis", "rediss", "unix", example="redis://localhost:6379/0")
    )


class AnthropicSettings(_Section):
    api_key: SecretStr | None = Field(None, alias="ANTHROPIC_API_KEY")
    base_url: str | None = Field(None, alias="ANTHROPIC_BASE_URL")
    # The current Sonnet (thinking always on, `agent/llm/binding.py`); 4.x models keep their
    # API behaviour (Sonnet 4.6 is Legacy, 4.5 retires on 2026-11-30: `parley doctor` says so).
    model: str = Field("claude-sonnet-5-5", alias="ANTHROPIC_MODEL")
    max_tokens: int = Field(4096, alias="PARLEY_ANTHROPIC_MAX_TOKENS", gt=0)
    # The current generation only (thinking always on, `agent/llm/catalog.py`): how hard it
    # thinks (the API's default, high, costs latency a chat feels), and whether its progress
    # notes come back (they feed the status line) or only their signatures.
    effort: Literal["low", "medium", "high", "xhigh", "max"] = Field(
        "medium", alias="PARLEY_ANTHROPIC_EFFORT"
    )
    thinking_display: Literal["summarized", "omitted"] = Field(
        "summarized", alias="PARLEY_ANTHROPIC_THINKING_DISPLAY"
    )
    # A smaller model for side jobs (compaction summaries, memory extraction); unset: the
    # chat model does them.
    side_model: str | None = Field(None, alias="PARLEY_ANTHROPIC_SIDE_MODEL")

    _scheme = field_validator("base_url", mode="before")(
        _url("http", "https", example="https://api.anthropic.com")
    )


class OllamaSettings(_Section):
    host: str = Field("http://127.0.0.1:11434", alias="OLLAMA_HOST")
    model: str = Field("qwen2.5:7b", alias="OLLAMA_MODEL")
    num_ctx: int = Field(16384, alias="PARLEY_OLLAMA_NUM_CTX", gt=0)
    timeout: float = Field(300.0, alias="PARLEY_OLLAMA_TIMEOUT", gt=0)
    embed_model: str = Field("all-minilm", alias="OLLAMA_EMBED_MODEL")
    # Ollama's `think` for models that think (qwen3, gpt-oss, deepseek-r1, …): "true",
    # "false", or a level ("low", "medium", "high", for gpt-oss); unset: the model's default.
    think: Literal["true", "false", "low", "medium", "high"] | None = Field(
        None, alias="PARLEY_OLLAMA_THINK"
    )


class LLMSettings(_Section):
    timeout: float = Field(30.0, alias="PARLEY_LLM_TIMEOUT", gt=0)
    suspect_after: float = Field(10.0, alias="PARLEY_LLM_SUSPECT_AFTER", gt=0)
    breaker_failures: int = Field(3, alias="PARLEY_BREAKER_FAILURES", ge=1)
    breaker_cooldown: float = Field(30.0, alias="PARLEY_BREAKER_COOLDOWN", gt=0)
    breaker_max_cooldown: float = Field(600.0, alias="PARLEY_BREAKER_MAX_COOLDOWN", gt=0)
    breaker_auth_cooldown: float = Field(3600.0, alias="PARLEY_BREAKER_AUTH_COOLDOWN", gt=0)
    # JSON: {"model": [input $/Mtok, output $/Mtok], ...}, added to (and overriding) the
    # built-in table of Claude models (`agent/llm/catalog.py`), so a new model's price needs
    # no release; unknown models cost 0. Cache reads bill at 0.1x and cache writes at 1.25x
    # the input price, as Anthropic's do.
    prices: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        alias="PARLEY_LLM_PRICES",
        examples=['{"claude-sonnet-4-6": [3.0, 15.0]}'],
    )


class AgentSettings(_Section):
    max_steps: int = Field(12, alias="PARLEY_MAX_STEPS", ge=1)
    run_token_budget: int = Field(200_000, alias="PARLEY_RUN_TOKEN_BUDGET", ge=1)
    run_deadline: float = Field(300.0, alias="PARLEY_RUN_DEADLINE", gt=0)
    context_tokens: int = Field(24_000, alias="PARLEY_CONTEXT_TOKENS", ge=1000)
    tool_timeout: float = Field(30.0, alias="PARLEY_TOOL_TIMEOUT", gt=0)
    tool_retries: int = Field(3, alias="PARLEY_TOOL_RETRIES", ge=0)
    tool_output_limit: int = Field(4000, alias="PARLEY_TOOL_OUTPUT_LIMIT", ge=200)
    tool_backoff: float = Field(0.5, alias="PARLEY_TOOL_BACKOFF", gt=0)
    tool_backoff_max: float = Field(8.0, alias="PARLEY_TOOL_BACKOFF_MAX", gt=0)
    skills_dir: DirectoryPath | None = Field(None, alias="PARLEY_SKILLS_DIR")
    # None: the platform's own maximum (Telegram 4,096, Slack 40,000), so whatever a person
    # can send is answered.
    max_message_chars: int | None = Field(None, alias="PARLEY_MAX_MESSAGE_CHARS", ge=1)


class McpSettings(_Section):
    config: Path | None = Field(None, alias="PARLEY_MCP_CONFIG")
    start_timeout: float = Field(20.0, alias="PARLEY_MCP_START_TIMEOUT", gt=0)
    call_timeout: float = Field(60.0, alias="PARLEY_MCP_CALL_TIMEOUT", gt=0)
    retry_max: float = Field(300.0, alias="PARLEY_MCP_RETRY_MAX", gt=0)
    # How long a 2025-11-25 server's call stays open while its question waits in the chat.
    question_wait: float = Field(600.0, alias="PARLEY_MCP_QUESTION_WAIT", gt=0)
    # Per-user servers ("auth": "user"): the Fernet key that encrypts people's tokens at rest,
    # the public base URL of /oauth/callback, and how long a Connect link stays usable.
    secret_key: SecretStr | None = Field(None, alias="PARLEY_SECRET_KEY")
    public_url: str | None = Field(None, alias="PARLEY_PUBLIC_URL")
    connect_ttl: float = Field(900.0, alias="PARLEY_CONNECT_TTL", gt=0)
    # Hosts that addresses a third party names (MCP metadata, registration and token
    # endpoints) may point to although they are loopback or private (agent/outbound.py).
    trusted_hosts: str = Field("", alias="PARLEY_TRUSTED_HOSTS")
    # Seconds a connected account is kept without being used (default 90 days).
    connection_idle: float = Field(90 * 86_400.0, alias="PARLEY_CONNECTION_IDLE", gt=0)
    # "Always for this tool" on servers with "standing": true: how long it lasts (seconds,
    # default 30 days) and whether it holds in the chat it was given in or everywhere.
    standing_ttl: float = Field(30 * 86_400.0, alias="PARLEY_STANDING_APPROVAL_TTL", gt=0)
    standing_scope: Literal["conversation", "everywhere"] = Field(
        "conversation", alias="PARLEY_STANDING_APPROVAL_SCOPE"
    )

    _file = field_validator("config", mode="before")(_a_file_not_json)
    _scheme = field_validator("public_url", mode="before")(
        _url("http", "https", example="https://parley.example.com")
    )

    @field_validator("secret_key")
    @classmethod
    def _fernet_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        # comma-separated: the first key encrypts, every key decrypts (a rotation)
        for key in value.get_secret_value().split(","):
            try:
                raw = base64.urlsafe_b64decode(key.strip().encode())
            except ValueError:
                raw = b""
            if len(raw) != 32:
                raise ValueError(
                    "must be a Fernet key: 32 bytes in URL-safe base64 (44 characters); "
                    "several when rotating, comma-separated, the current one first"
                )
        return value


class MemorySettings(_Section):
    embedder: Literal["local", "multilingual", "ollama", "openai"] = Field(
        "local", alias="PARLEY_EMBEDDER"
    )
    embed_url: str | None = Field(None, alias="PARLEY_EMBED_URL")
    embed_model: str | None = Field(None, alias="PARLEY_EMBED_MODEL")
    embed_api_key: SecretStr | None = Field(None, alias="PARLEY_EMBED_API_KEY")
    embed_timeout: float = Field(10.0, alias="PARLEY_EMBED_TIMEOUT", gt=0)
    recall_k: int = Field(5, alias="PARLEY_RECALL_K", ge=1)
    # The distances below default to the embedder's own (memory.config.Tuning): unset, each
    # model gets what bench_recall measured for it.
    recall_max_distance: float | None = Field(None, alias="PARLEY_RECALL_MAX_DISTANCE", gt=0, le=2)
    recall_margin: float | None = Field(None, alias="PARLEY_RECALL_MARGIN", ge=0, le=2)
    recall_recency_weight: float = Field(0.0, alias="PARLEY_RECALL_RECENCY_WEIGHT", ge=0, le=1)
    recall_generic_distance: float | None = Field(
        None, alias="PARLEY_RECALL_GENERIC_DISTANCE", ge=0, le=2
    )
    merge_distance: float | None = Field(None, alias="PARLEY_MEMORY_MERGE_DISTANCE", ge=0, le=2)
    max_per_user: int = Field(1000, alias="PARLEY_MEMORY_MAX_PER_USER", ge=1)
    max_per_chat: int = Field(10_000, alias="PARLEY_MEMORY_MAX_PER_CHAT", ge=1)
    max_per_team: int = Field(100_000, alias="PARLEY_MEMORY_MAX_PER_TEAM", ge=1)
    index: Literal["flat", "hnsw"] = Field("hnsw", alias="PARLEY_MEMORY_INDEX")
    hybrid_policy: Literal["auto", "adhoc_bf", "batches"] = Field(
        "auto", alias="PARLEY_MEMORY_HYBRID_POLICY"
    )
    extract: bool = Field(False, alias="PARLEY_MEMORY_EXTRACT")

    _scheme = field_validator("embed_url", mode="before")(
        _url("http", "https", example="http://127.0.0.1:8000")
    )

    @model_validator(mode="after")
    def _openai_named(self) -> MemorySettings:
        if self.embedder == "openai" and not (self.embed_url and self.embed_model):
            raise ValueError("PARLEY_EMBEDDER=openai needs PARLEY_EMBED_URL and PARLEY_EMBED_MODEL")
        return self


class TelegramSettings(_Section):
    token: SecretStr | None = Field(None, alias="TELEGRAM_BOT_TOKEN")
    api_url: str = Field("https://api.telegram.org", alias="TELEGRAM_API_URL")
    mode: Literal["polling", "webhook"] = Field("polling", alias="PARLEY_TELEGRAM_MODE")
    webhook_url: str | None = Field(None, alias="PARLEY_TELEGRAM_WEBHOOK_URL")
    webhook_secret: SecretStr | None = Field(None, alias="PARLEY_TELEGRAM_WEBHOOK_SECRET")
    allowed_users: CommaList = Field(default_factory=list, alias="PARLEY_TELEGRAM_ALLOWED_USERS")
    # pairing: anyone else gets a code the operator or an approver accepts; open: anyone
    access: Literal["pairing", "open"] = Field("pairing", alias="PARLEY_TELEGRAM_ACCESS")
    poll_timeout: int = Field(30, alias="PARLEY_TELEGRAM_POLL_TIMEOUT", ge=0, le=50)
    ephemeral_prompts: bool = Field(True, alias="PARLEY_TELEGRAM_EPHEMERAL_PROMPTS")
    reoffer_after: float = Field(300.0, alias="PARLEY_TELEGRAM_REOFFER_AFTER", ge=0)

    _split = field_validator("allowed_users", mode="before")(_split_commas)
    _scheme = field_validator("api_url", mode="before")(
        _url("http", "https", example="https://api.telegram.org")
    )
    _hook_scheme = field_validator("webhook_url", mode="before")(
        _url("http", "https", example="https://parley.example.com/telegram/webhook")
    )


# The bot scopes of deploy/slack-app-manifest.yaml, asked for by an OAuth install.
SLACK_BOT_SCOPES = (
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "commands",
    "usergroups:read",
    "assistant:write",
    "files:read",
    "users:read",
    "channels:read",
    "groups:read",
    "team:read",
)


class SlackSettings(_Section):
    bot_token: SecretStr | None = Field(None, alias="SLACK_BOT_TOKEN")
    signing_secret: SecretStr | None = Field(None, alias="SLACK_SIGNING_SECRET")
    app_token: SecretStr | None = Field(None, alias="SLACK_APP_TOKEN")
    api_url: str = Field("https://slack.com/api/", alias="SLACK_API_URL")
    allowed_teams: CommaList = Field(default_factory=list, alias="PARLEY_SLACK_ALLOWED_TEAMS")
    allowed_channels: CommaList = Field(default_factory=list, alias="PARLEY_SLACK_ALLOWED_CHANNELS")
    greeting: str = Field("Hi! I'm Parley. What can I do for you?", alias="PARLEY_SLACK_GREETING")
    # "agent": Slack's agent messaging (manifest features.agent_view); "assistant": an app
    # still on features.assistant_view
    surface: Literal["agent", "assistant"] = Field("agent", alias="PARLEY_SLACK_SURFACE")
    # a history read's Retry-After up to this is waited; longer, the run goes on without it
    history_wait: float = Field(2.0, alias="PARLEY_SLACK_HISTORY_WAIT", ge=0, le=30)
    # Who memories shared with the team reach: the person's workspace, or their whole
    # Enterprise Grid organisation (a workspace in none keeps its own); both are read
    team_memories: Literal["workspace", "organisation"] = Field(
        "workspace", alias="PARLEY_SLACK_TEAM_MEMORIES"
    )
    # Set both: workspaces install Parley through OAuth v2 (/slack/install), one bot token
    # each, kept encrypted in Redis (PARLEY_SECRET_KEY, PARLEY_PUBLIC_URL needed)
    client_id: str | None = Field(None, alias="SLACK_CLIENT_ID")
    client_secret: SecretStr | None = Field(None, alias="SLACK_CLIENT_SECRET")
    scopes: CommaList = Field(
        default_factory=lambda: list(SLACK_BOT_SCOPES), alias="PARLEY_SLACK_SCOPES"
    )

    @property
    def installs(self) -> bool:
        return bool(self.client_id and self.client_secret)

    suggested_prompts: CommaList = Field(
        default_factory=lambda: [
            "What can you do?",
            "Remind me to stretch in an hour",
            "What do you remember about me?",
        ],
        alias="PARLEY_SLACK_SUGGESTED_PROMPTS",
    )

    _split = field_validator("allowed_teams", "allowed_channels", mode="before")(_split_commas)
    _split_prompts = field_validator("suggested_prompts", mode="before")(_split_commas)
    _scheme = field_validator("api_url", mode="before")(
        _url("http", "https", example="https://slack.com/api/")
    )


class HttpSettings(_Section):
    host: str = Field("127.0.0.1", alias="PARLEY_HTTP_HOST")
    port: int = Field(8080, alias="PARLEY_HTTP_PORT", ge=0, le=65535)
    # Health, readiness and metrics: an internal listener, never behind the public ingress.
    metrics_host: str = Field("127.0.0.1", alias="PARLEY_METRICS_HOST")
    metrics_port: int = Field(9090, alias="PARLEY_METRICS_PORT", ge=0, le=65535)
    # /readyz calls a platform degraded once its API calls have failed this long on end.
    platform_degraded_after: float = Field(60.0, alias="PARLEY_PLATFORM_DEGRADED_AFTER", gt=0)


class AccessSettings(_Section):
    approvers: CommaList = Field(default_factory=list, alias="PARLEY_APPROVERS")

    _split = field_validator("approvers", mode="before")(_split_commas)


class RuntimeSettings(_Section):
    concurrency: int = Field(32, alias="PARLEY_WORKER_CONCURRENCY", ge=1)
    decision_ttl: float = Field(86_400.0, alias="PARLEY_DECISION_TTL", gt=0)
    lock_lease: float = Field(30.0, alias="PARLEY_LOCK_LEASE", gt=0)
    reclaim_idle: float = Field(60.0, alias="PARLEY_RECLAIM_IDLE", gt=0)
    dedup_ttl: float = Field(86_400.0, alias="PARLEY_DEDUP_TTL", gt=0)
    session_ttl: float = Field(30 * 86_400.0, alias="PARLEY_SESSION_TTL", gt=0)
    drain_timeout: float = Field(30.0, alias="PARLEY_DRAIN_TIMEOUT", gt=0)
    stop_grace: float = Field(10.0, alias="PARLEY_STOP_GRACE", gt=0)
    delivery_attempts: int = Field(3, alias="PARLEY_DELIVERY_ATTEMPTS", ge=1)
    redeliver_for: float = Field(6 * 3600.0, alias="PARLEY_REDELIVER_FOR", gt=0)
    max_attempts: int = Field(3, alias="PARLEY_MAX_ATTEMPTS", ge=1)
    gc_freeze: bool = Field(True, alias="PARLEY_GC_FREEZE")
    gc_threshold: Annotated[tuple[int, int, int], NoDecode] = Field(
        (10_000, 20, 20), alias="PARLEY_GC_THRESHOLD"
    )

    @field_validator("gc_threshold", mode="before")
    @classmethod
    def _three_ints(cls, value: Any) -> Any:
        return _split_commas(value) if isinstance(value, str) else value


class LimitsSettings(_Section):
    messages_per_minute: int = Field(20, alias="PARLEY_RATE_LIMIT_PER_MINUTE", ge=1)
    user_daily_tokens: int = Field(500_000, alias="PARLEY_USER_DAILY_TOKENS", ge=1)
    daily_tokens: int = Field(10_000_000, alias="PARLEY_DAILY_TOKENS", ge=1)


class StreamingSettings(_Section):
    enabled: bool = Field(True, alias="PARLEY_STREAMING")
    interval: float = Field(1.0, alias="PARLEY_STREAM_INTERVAL", gt=0, le=30)
    # under a second: any answer that takes longer than that to write streams
    first_show: float = Field(0.5, alias="PARLEY_STREAM_FIRST_SHOW", ge=0, lt=1)


class AttachmentSettings(_Section):
    max_file_mb: float = Field(20.0, alias="PARLEY_MAX_FILE_MB", gt=0)
    max_files: int = Field(5, alias="PARLEY_MAX_FILES", ge=1, le=20)
    file_tokens: int = Field(8000, alias="PARLEY_FILE_TOKENS", ge=100)
    thread_tokens: int = Field(2000, alias="PARLEY_THREAD_CONTEXT_TOKENS", ge=0)
    pdf_timeout: float = Field(20.0, alias="PARLEY_PDF_TIMEOUT", gt=0)
    # a file-reading child's address space, and how many PDFs (and images) read at once
    reader_memory_mb: int = Field(192, alias="PARLEY_FILE_READER_MEMORY_MB", ge=64)
    readers: int = Field(2, alias="PARLEY_FILE_READERS", ge=1)


class VoiceSettings(_Section):
    transcribe_url: str | None = Field(None, alias="PARLEY_TRANSCRIBE_URL")
    transcribe_model: str = Field("whisper-1", alias="PARLEY_TRANSCRIBE_MODEL")
    transcribe_api_key: SecretStr | None = Field(None, alias="PARLEY_TRANSCRIBE_API_KEY")
    transcribe_timeout: float = Field(60.0, alias="PARLEY_TRANSCRIBE_TIMEOUT", gt=0)
    max_mb: float = Field(20.0, alias="PARLEY_VOICE_MAX_MB", gt=0)
    max_seconds: float = Field(600.0, alias="PARLEY_VOICE_MAX_SECONDS", gt=0)

    _scheme = field_validator("transcribe_url", mode="before")(
        _url("http", "https", example="https://api.openai.com")
    )


class SchedulesSettings(_Section):
    # the shortest time between two runs of a schedule, cron expressions included
    min_interval: float = Field(60.0, alias="PARLEY_SCHEDULE_MIN_INTERVAL", gt=0)
    # schedules one person may have, in every chat together (a chat holds at most 50)
    per_owner: int = Field(20, alias="PARLEY_SCHEDULES_PER_OWNER", ge=1)
    # days a schedule paused because its owner or its chat is gone is kept for a resume
    orphan_days: float = Field(30.0, alias="PARLEY_SCHEDULE_ORPHAN_DAYS", gt=0)
    # JSON file: trigger name → secret, conversation, objective template (POST /hooks/<name>)
    triggers_config: Path | None = Field(None, alias="PARLEY_TRIGGERS_CONFIG")

    _file = field_validator("triggers_config", mode="before")(_a_file_not_json)


class LogSettings(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", alias="PARLEY_LOG_LEVEL")
    format: Literal["json", "text"] = Field("text", alias="PARLEY_LOG_FORMAT")

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class Settings(BaseModel):
    """Every section of Parley's configuration."""

    model_config = {"frozen": True}

    redis: RedisSettings
    anthropic: AnthropicSettings
    ollama: OllamaSettings
    llm: LLMSettings
    agent: AgentSettings
    mcp: McpSettings
    memory: MemorySettings
    telegram: TelegramSettings
    slack: SlackSettings
    http: HttpSettings
    access: AccessSettings
    runtime: RuntimeSettings
    limits: LimitsSettings
    log: LogSettings
    streaming: StreamingSettings
    attachments: AttachmentSettings
    voice: VoiceSettings
    schedules: SchedulesSettings

    @classmethod
    def load(cls, env_file: str | Path | None = ".env", **overrides: Any) -> Settings:
        """Read every section; raise ConfigError naming each bad variable."""
        if env_file is not None:
            check_env_file(Path(env_file))
        sections: dict[str, Any] = {}
        problems: list[str] = []
        for name, field in cls.model_fields.items():
            section_type = field.annotation
            assert isinstance(section_type, type) and issubclass(section_type, _Section)
            try:
                sections[name] = section_type(
                    _env_file=env_file,  # type: ignore[call-arg]
                    **overrides.get(name, {}),
                )
            except ValidationError as exc:
                problems.extend(_describe(exc))
            except SettingsError as exc:  # a JSON-typed variable that is not JSON
                problems.append(_undecodable(section_type, exc))
        if len(problems) == 1:
            raise ConfigError(f"invalid configuration: {problems[0]}")
        if problems:
            raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
        return cls(**sections)

    def chat_platforms(self) -> set[str]:
        """The chat platforms whose credentials are set: an adapter starts for each."""
        found = {"telegram"} if self.telegram.token is not None else set()
        slack = self.slack.bot_token is not None or self.slack.installs
        return found | ({"slack"} if slack else set())


def check_env_file(path: Path, *, required: bool = False) -> None:
    """A settings file must be readable text of KEY=value lines; say where it is not."""
    if not path.exists():
        if required:
            raise ConfigError(f"settings file {path} does not exist")
        return
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"settings file {path} cannot be read as UTF-8 text ({exc})") from None
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            # the line's name at most: the rest may be a token (and no redaction exists yet)
            line = text.splitlines()[binding.original.line - 1].strip()
            name = re.match(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=", line)
            shown = f"the line for {name[1]}" if name else "it"
            raise ConfigError(
                f"settings file {path}, line {binding.original.line}: cannot read {shown} "
                "(expected NAME=value; the line is not shown, it may hold a secret)"
            )


def _describe(exc: ValidationError) -> list[str]:
    lines = []
    for error in exc.errors():
        variable = ".".join(str(part) for part in error["loc"]) or "?"
        given = error.get("input")
        shown = "" if isinstance(given, dict) or given is None else f" (got {given!r})"
        if _SECRET_NAME.search(variable) or "@" in str(given):  # a token, or a URL's password
            shown = ""
        lines.append(f"{variable}: {error['msg'].removeprefix('Value error, ')}{shown}")
    return lines


def _undecodable(section: type[BaseSettings], exc: SettingsError) -> str:
    """`PARLEY_X: not valid JSON (why)`, from pydantic-settings' "error parsing value for
    field "x"" (the value is not shown: it may hold a secret)."""
    found = re.search(r'field "(\w+)"', str(exc))
    field = section.model_fields.get(found[1]) if found else None
    variable = (field.alias if field is not None else None) or (found[1] if found else "?")
    why = f" ({exc.__cause__})" if exc.__cause__ is not None else ""
    example = f"; for example {field.examples[0]}" if field and field.examples else ""
    return f"{variable}: not valid JSON{why}{example}"


def all_variables() -> dict[str, Any]:
    """Every environment variable Parley reads, with its default."""
    out: dict[str, Any] = {}
    for field in Settings.model_fields.values():
        section_type = field.annotation
        assert isinstance(section_type, type) and issubclass(section_type, BaseSettings)
        for inner in section_type.model_fields.values():
            alias = inner.alias
            if isinstance(inner.validation_alias, AliasChoices):
                alias = str(inner.validation_alias.choices[0])
            assert alias is not None
            out[alias] = inner.get_default(call_default_factory=True)
    return out
