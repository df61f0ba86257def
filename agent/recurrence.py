"""When a schedule runs: a 5-field cron expression in a time zone, or `every <N> <unit>`.

Cron slots come from cronsim in the owner's zone (zoneinfo), which follows cron's rules on
daylight-saving days: a time that does not exist that day runs once, at the first minute
that does; a time that occurs twice runs once. Interval slots are counted from an anchor in
epoch seconds, so clocks moving in a zone do not move them.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

_EVERY = re.compile(r"^\s*every\s+(\d+)\s+(second|minute|hour|day)s?\s*$", re.IGNORECASE)
_UNIT = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}
GAP_SAMPLES = 300  # successive cron slots looked at for the shortest gap
HORIZON = 10 * 366 * 86_400.0  # seconds ahead a schedule must run within, and slots are sought
NEVER = (
    "{when!r} never runs: no date in the next ten years matches it (a day the month it names "
    "does not have, like 31 February, or a weekday that month never has)."
)
# cronsim's terse reasons, said so a person can act on them
_REASONS = {
    "Bad day-of-month": "that day never comes (no month it names has it, like 31 February)",
    "Bad day-of-week": "the weekday is not 0-7, MON-SUN, or one of their L/# forms",
    "Bad month": "the month is not 1-12 or JAN-DEC",
    "Bad hour": "the hour is not 0-23",
    "Bad minute": "the minute is not 0-59",
}


class RecurrenceError(ValueError):
    """`when` is not something a schedule can use; the message says why, for the model."""


def zone_of(name: str | None) -> tzinfo:
    """An IANA zone by name (UTC when none)."""
    if not name or name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise RecurrenceError(f"Unknown time zone {name!r}; use an IANA name.") from None


@dataclass(frozen=True, kw_only=True)
class Recurrence:
    when: str
    cron: str | None = None
    every: int | None = None  # seconds

    @classmethod
    def parse(cls, when: str) -> Recurrence:
        return _parse(when)

    @classmethod
    def _parse(cls, when: str) -> Recurrence:
        text = " ".join(when.split())
        if match := _EVERY.match(text):
            seconds = int(match.group(1)) * _UNIT[match.group(2).lower()]
            if seconds <= 0:
                raise RecurrenceError("The interval must be at least one second.")
            return cls(when=text, every=seconds)
        if len(text.split(" ")) != 5:
            raise RecurrenceError(
                f"{when!r} is neither a 5-field cron expression (minute hour day month weekday) "
                "nor 'every <N> seconds|minutes|hours|days'."
            )
        try:
            CronSim(text, datetime.now(UTC))
        except CronSimError as exc:
            reason = _REASONS.get(str(exc), str(exc))
            raise RecurrenceError(f"{when!r} is not a valid cron expression: {reason}.") from None
        return cls(when=text, cron=text)

    def next_after(self, moment: float, zone: tzinfo, anchor: float) -> float:
        """The first slot strictly after `moment` (epoch seconds)."""
        if self.every is not None:
            steps = int((moment - anchor) // self.every) + 1
            return anchor + max(steps, 1) * self.every
        assert self.cron is not None
        start = datetime.fromtimestamp(int(moment), zone)
        try:
            return next(CronSim(self.cron, start)).timestamp()
        except (OverflowError, StopIteration):  # searched past year 9999: it never runs again
            raise RecurrenceError(NEVER.format(when=self.when)) from None

    def upcoming(self, moment: float, zone: tzinfo, anchor: float, count: int) -> list[float]:
        slots: list[float] = []
        for _ in range(count):
            moment = self.next_after(moment, zone, anchor)
            slots.append(moment)
        return slots

    def shortest_gap(self, moment: float, zone: tzinfo) -> float:
        """The least time between two slots (for cron: over the next few hundred slots)."""
        if self.every is not None:
            return float(self.every)
        assert self.cron is not None
        # slots within the horizon only: a date that comes once in decades would have the
        # search walk day by day to year 9999 (seconds of CPU, then an OverflowError)
        end = moment + HORIZON
        slots: list[float] = []
        try:
            for slot in CronSim(self.cron, datetime.fromtimestamp(int(moment), zone)):
                if slot.timestamp() > end or len(slots) == GAP_SAMPLES:
                    break
                slots.append(slot.timestamp())
        except (OverflowError, StopIteration):
            pass
        if not slots:
            raise RecurrenceError(NEVER.format(when=self.when))
        return min((b - a for a, b in zip(slots, slots[1:], strict=False)), default=HORIZON)


@functools.lru_cache(maxsize=4096)
def _parse(when: str) -> Recurrence:
    # A clock looks at thousands of schedules a pass, most sharing a handful of `when`s.
    return Recurrence._parse(when)


def check(when: str, zone_name: str | None, min_interval: float, now: float) -> Recurrence:
    """The recurrence `when` names, refused (RecurrenceError) if it is invalid or too frequent."""
    recurrence = Recurrence.parse(when)
    zone = zone_of(zone_name)
    gap = recurrence.shortest_gap(now, zone)
    if gap < min_interval:
        raise RecurrenceError(
            f"That runs too often: schedules may run at most once every {_span(min_interval)} "
            f"(the minimum interval is {int(min_interval)} seconds)."
        )
    return recurrence


def local_time(moment: float, zone: tzinfo) -> str:
    """A slot as the owner reads it: weekday, date, time and zone abbreviation."""
    return datetime.fromtimestamp(moment, zone).strftime("%a %Y-%m-%d %H:%M:%S %Z")


def _span(seconds: float) -> str:
    for unit, size in (("day", 86_400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}" if count != 1 else unit
    return f"{int(seconds)} seconds"
