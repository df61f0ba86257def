"""`parley doctor`: one line per dependency, each failure with what to do about it.

The checks live beside what they check: `checks.py` (listeners, Redis), `service_checks.py`
(models, platforms); the composition root adds its own (MCP servers) through `extra`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from bot.config import Settings
from bot.ops.checks import CHECK_TIMEOUT, Check, CheckFn, check_http, check_redis
from bot.ops.embedding_check import check_embeddings, check_memory_index
from bot.ops.invocation import parley_command, settings_hint
from bot.ops.service_checks import check_anthropic, check_ollama, check_slack, check_telegram
from bot.ops.trigger_check import check_triggers

CHECKS: list[CheckFn] = [
    check_http,
    check_redis,
    check_anthropic,
    check_ollama,
    check_slack,
    check_telegram,
    check_triggers,
    check_embeddings,
    check_memory_index,
]


async def _guarded(check: CheckFn, settings: Settings) -> Check:
    name = check.__name__.removeprefix("check_")
    try:
        async with asyncio.timeout(CHECK_TIMEOUT + 5):
            return await check(settings)
    except TimeoutError:
        return Check(name=name, status="fail", detail="no answer in time", hint="check the network")


async def diagnose(settings: Settings, extra: Sequence[CheckFn] = ()) -> list[Check]:
    checks = [*CHECKS, *extra]
    return list(await asyncio.gather(*(_guarded(check, settings) for check in checks)))


def verdict(checks: list[Check]) -> tuple[bool, str]:
    """Redis is required, and at least one model provider; platforms are optional."""
    by_name = {c.name: c for c in checks}
    if any(c.status == "fail" for c in checks):
        return False, "some checks failed"
    if by_name["redis"].status != "ok":
        return False, "Redis is required"
    if "ok" not in (by_name["anthropic"].status, by_name["ollama"].status):
        return (
            False,
            "no model provider: set ANTHROPIC_API_KEY, or run Ollama with the model pulled",
        )
    return True, "ready"


async def run_doctor(settings: Settings, extra: Sequence[CheckFn] = ()) -> int:
    checks = await diagnose(settings, extra)
    for check in checks:
        print(check.line())
    ok, summary = verdict(checks)
    print(f"\n{'ready' if ok else 'not ready'}: {summary}", file=sys.stdout)
    if not ok:
        print(f"{settings_hint()}; then run `{parley_command()} doctor` again")
    return 0 if ok else 1
