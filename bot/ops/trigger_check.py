"""`parley doctor`'s triggers line: the file loads, and every trigger can be delivered."""

from __future__ import annotations

from bot.config import ConfigError, Settings
from bot.features.triggers import deliverable_triggers
from bot.ops.checks import Check


async def check_triggers(settings: Settings) -> Check:
    path = settings.schedules.triggers_config
    if path is None:
        return Check(
            name="triggers",
            status="not configured",
            detail="PARLEY_TRIGGERS_CONFIG is not set",
            hint="optional: a JSON file of webhook triggers (README: Schedules and triggers)",
        )
    try:
        triggers = deliverable_triggers(path, settings.chat_platforms())
    except ConfigError as exc:
        return Check(
            name="triggers", status="fail", detail=str(exc), hint="fix the file, then run again"
        )
    if not triggers:
        return Check(
            name="triggers",
            status="warn",
            detail=f"{path} names no triggers",
            hint="add one, or unset PARLEY_TRIGGERS_CONFIG",
        )
    where = ", ".join(f"{t.name} → {t.address}" for t in triggers.values())
    return Check(name="triggers", status="ok", detail=f"POST /hooks/<name>: {where}")
