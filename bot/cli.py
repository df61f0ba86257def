"""The `parley` command."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from bot.config import ConfigError, Settings, check_env_file
from bot.ops.logs import configure_logging
from bot.ops.secrets import RedactingStream, configured_secrets, seal

COMMANDS = {
    "run": "run everything in one process: HTTP, platforms and workers (the default)",
    "gateway": "receive platform events (HTTP, Socket Mode, Telegram polling) and queue them",
    "worker": "process queued events: run the agent and deliver replies",
    "console": "chat with the agent in this terminal, no chat platform needed",
    "doctor": "check the configuration and every service Parley talks to",
    "schedules": "list every schedule: id, state, next run, owner, conversation, objective",
    "setup": "build the local embedding model now (otherwise the first start builds it)",
}
TERMINAL = ("console", "doctor", "mcp")  # commands whose output is a conversation or a table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="parley",
        description="Parley: a Slack and Telegram agent with memory, tools and approvals.",
    )
    parser.add_argument("--version", action="version", version=f"parley {parley_version()}")
    add_env_file(parser, default=None)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        command = commands.add_parser(name, help=help_text, description=help_text)
        add_env_file(command)
        if name == "console":
            command.add_argument(
                "--demo",
                action="store_true",
                help="answer with a scripted stand-in model: try Parley with no model set up",
            )
    memory = commands.add_parser(
        "memory", help="manage long-term memory", description="manage long-term memory"
    )
    memory_commands = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    reindex = memory_commands.add_parser(
        "reindex",
        help="move every memory to the configured embedder (PARLEY_EMBEDDER) while Parley runs",
        description=(
            "move every memory to the configured embedder (PARLEY_EMBEDDER) in a new index "
            "beside the old one, while Parley runs; safe to interrupt and run again"
        ),
    )
    add_env_file(reindex)
    reindex.add_argument(
        "--batch", type=int, default=64, help="memories embedded together (default 64)"
    )
    mcp = commands.add_parser(
        "mcp", help="MCP servers (PARLEY_MCP_CONFIG)", description="MCP servers (PARLEY_MCP_CONFIG)"
    )
    mcp_commands = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    mcp_commands.add_parser(
        "list",
        help="start each server and show its state and tools with their approval class",
        description="start each server and show its state and tools with their approval class",
    )
    connections = commands.add_parser(
        "connections",
        help="people's connected accounts (per-user MCP servers)",
        description="people's connected accounts (per-user MCP servers)",
    )
    connection_commands = connections.add_subparsers(
        dest="connections_command", metavar="ACTION", required=True
    )
    add_env_file(
        connection_commands.add_parser(
            "rekey",
            help="re-encrypt every stored account with the first key of PARLEY_SECRET_KEY",
            description="re-encrypt every stored account with the first key of "
            "PARLEY_SECRET_KEY (put the new key first, the old one after a comma, run this, "
            "then drop the old key)",
        )
    )
    remove = connection_commands.add_parser(
        "remove",
        help="revoke and forget every account a person connected",
        description="revoke (where the server can) and forget every account a person connected",
    )
    remove.add_argument("platform", choices=["slack", "telegram", "console"])
    remove.add_argument("user_id")
    add_env_file(remove)
    breaker = commands.add_parser(
        "breaker",
        help="show the hosted model's circuit breaker, or reset it",
        description="show the hosted model's circuit breaker (state and why), or reset it",
    )
    breaker.add_argument("action", nargs="?", choices=["show", "reset"], default="show")
    add_env_file(breaker)
    pairing = commands.add_parser(
        "pairing",
        help="Telegram pairing: list codes and paired people, approve a code, revoke a person",
        description="Telegram pairing (PARLEY_TELEGRAM_ACCESS=pairing): `list` the live codes "
        "and the people paired, `approve CODE` lets its person talk to the bot, `revoke USER_ID`",
    )
    pairing.add_argument("action", nargs="?", choices=["list", "approve", "revoke"], default="list")
    pairing.add_argument("value", nargs="?", default="", metavar="CODE|USER_ID")
    add_env_file(pairing)
    return parser


def add_env_file(parser: argparse.ArgumentParser, default: object = argparse.SUPPRESS) -> None:
    # Accepted before or after the subcommand; SUPPRESS keeps a later parser from resetting it.
    parser.add_argument(
        "--env-file", default=default, metavar="FILE", help="settings file (default: .env)"
    )


def parley_version() -> str:
    try:
        return version("parley")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = args.command or "run"
    try:
        if args.env_file is not None:
            check_env_file(Path(args.env_file), required=True)
        settings = Settings.load(args.env_file or ".env")
    except ConfigError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 2
    command = command_for(command, settings, interactive=sys.stdin.isatty())
    # The console's chat and doctor's and mcp list's tables own the terminal; logs go to a file.
    log_file = settings.redis.data_dir / f"{command}.log" if command in TERMINAL else None
    secrets = configured_secrets(settings)
    configure_logging(settings.log.level, settings.log.format, secrets, file=log_file)
    seal(secrets)
    if log_file is not None and command == "console":
        print(f"(logs go to {log_file})", file=sys.stderr)
    streams = sys.stdout, sys.stderr
    if command != "console":  # the console's terminal belongs to the chat
        sys.stdout = RedactingStream(sys.stdout, secrets)
        sys.stderr = RedactingStream(sys.stderr, secrets)
    try:
        return asyncio.run(dispatch(command, args, settings))
    except KeyboardInterrupt:
        return 130
    finally:
        sys.stdout, sys.stderr = streams


def command_for(command: str, settings: Settings, *, interactive: bool) -> str:
    """`run` in a terminal with nothing to serve chats in the terminal instead; a triggers
    file is something to serve (/hooks), and start-up then names what it lacks."""
    idle = not settings.chat_platforms() and settings.schedules.triggers_config is None
    return "console" if command == "run" and idle and interactive else command


async def dispatch(command: str, args: argparse.Namespace, settings: Settings) -> int:
    from agent.mcp import McpConfigError
    from bot.ops.embedded_redis import EmbeddedRedisError
    from bot.ops.http import PortInUse
    from memory import MemoryIndexMismatch

    try:
        if command == "doctor":
            from bot.ops.doctor import run_doctor
            from bot.wiring.mcp_setup import check_mcp
            from bot.wiring.models import check_breaker

            return await run_doctor(settings, extra=[check_mcp, check_breaker])
        if command == "memory":
            return await memory_command(args, settings)
        if command == "mcp":
            return await mcp_command(settings)
        if command == "breaker":
            return await breaker_command(args.action, settings)
        if command == "connections":
            return await connections_command(args, settings)
        if command == "schedules":
            return await schedules_command(settings)
        if command == "pairing":
            return await pairing_command(args.action, args.value, settings)
        if command == "setup":
            return await setup_command(settings)
        if command == "console":
            from bot.wiring.console import run_console

            return await run_console(settings, demo=getattr(args, "demo", False))
        from bot.wiring.app import Role, serve

        role: Role = (
            "gateway" if command == "gateway" else "worker" if command == "worker" else "all"
        )
        await serve(settings, role=role)
        return 0
    except (EmbeddedRedisError, MemoryIndexMismatch, McpConfigError) as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 1
    except (PortInUse, ConfigError) as exc:  # ConfigError: a file a setting names (triggers)
        print(f"parley: {exc}", file=sys.stderr)
        return 2


async def memory_command(args: argparse.Namespace, settings: Settings) -> int:
    from bot.ops.progress import ProgressLine
    from bot.wiring.connection import redis_connection
    from bot.wiring.memory_setup import reindex

    progress = ProgressLine(sys.stderr)
    async with redis_connection(settings) as redis:
        count = await reindex(settings, redis, batch=max(1, args.batch), progress=progress.show)
    progress.end()
    print(
        f"memory moved to {settings.memory.embedder}: {count} memories embedded, "
        "the old index removed; start Parley with this PARLEY_EMBEDDER"
    )
    return 0


async def breaker_command(action: str, settings: Settings) -> int:
    from bot.wiring.connection import redis_connection
    from bot.wiring.models import breaker_state

    if settings.anthropic.api_key is None:
        print("no hosted model (ANTHROPIC_API_KEY is not set): no breaker")
        return 0
    async with redis_connection(settings) as redis:
        state = breaker_state(settings, redis)
        status = await (state.reset() if action == "reset" else state.status())
    print(f"anthropic breaker: {status.describe()}")
    if action == "reset":
        print("reset: closed, no failures; the next model call tries Anthropic")
    return 0


async def connections_command(args: argparse.Namespace, settings: Settings) -> int:
    from bot.wiring.connection import redis_connection
    from bot.wiring.mcp_setup import build_connections

    async with redis_connection(settings) as redis:
        connections = build_connections(settings, redis)
        if connections is None:
            print("no per-user MCP servers (or PARLEY_SECRET_KEY / PARLEY_PUBLIC_URL unset)")
            return 0
        if args.connections_command == "rekey":
            done, unreadable = await connections.rekey()
            print(f"re-encrypted {done} records with the current key")
            if unreadable:
                print(f"{unreadable} records open with none of the keys; they are left as they are")
            return 1 if unreadable else 0
        removed = await connections.remove_person(args.platform, args.user_id)
        print(f"revoked and removed: {', '.join(removed) or 'nothing was connected'}")
        return 0


async def schedules_command(settings: Settings) -> int:
    from bot.features.schedules.store import ScheduleStore, listed
    from bot.runtime.keys import Keys
    from bot.wiring.connection import redis_connection

    async with redis_connection(settings) as redis:
        found = await ScheduleStore(redis, Keys(settings.redis.key_prefix)).everything()
    for line in listed(found):
        print(line)
    return 0


async def pairing_command(action: str, value: str, settings: Settings) -> int:
    from bot.runtime.keys import Keys
    from bot.runtime.pairing import Pairings, access_line
    from bot.wiring.connection import redis_connection

    if action != "list" and not value:
        print(f"parley: pairing {action} needs a {'code' if action == 'approve' else 'user id'}")
        return 2
    async with redis_connection(settings) as redis:
        pairings = Pairings(redis, Keys(settings.redis.key_prefix))
        if action == "approve":
            request = await pairings.approve(value)
            if request is None:
                print(f"parley: no live pairing code {value} (expired, used, or mistyped)")
                return 1
            print(f"paired: {request.name} (Telegram user {request.user_id})")
            return 0
        if action == "revoke":
            found = await pairings.revoke(value)
            print(f"revoked: {value}" if found else f"{value} was not paired")
            return 0 if found else 1
        print(f"Telegram access: {access_line(settings)}")
        for request in await pairings.pending():
            print(f"code {request.code}  {request.name} (user {request.user_id})")
        for user_id in await pairings.paired():
            print(f"paired  user {user_id}")
    return 0


async def setup_command(settings: Settings) -> int:
    from memory import EmbeddingModelError
    from memory.model_build import build

    if settings.memory.embedder == "ollama":
        print("memory embeds with Ollama (PARLEY_EMBEDDER=ollama): no local model to build")
        return 0
    started = time.monotonic()
    try:
        path = await asyncio.to_thread(build)
    except EmbeddingModelError as exc:
        print(f"parley: {exc}", file=sys.stderr)
        return 1
    print(f"embedding model ready: {path} ({time.monotonic() - started:.1f} s)")
    return 0


async def mcp_command(settings: Settings) -> int:
    from bot.wiring.mcp_setup import build_toolbox, listing

    toolbox = build_toolbox(settings)
    if toolbox is None:
        print("no MCP servers: PARLEY_MCP_CONFIG is not set")
        return 0
    await toolbox.start()
    try:
        for line in listing(toolbox):
            print(line)
        return 0 if all(s.state == "ready" for s in toolbox.status().values()) else 1
    finally:
        await toolbox.stop()


if __name__ == "__main__":
    sys.exit(main())
