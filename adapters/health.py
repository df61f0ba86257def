"""Whether a platform's API has been answering, for readiness.

An adapter tells its `ApiHealth` about each call it makes to the platform. One failure is
noise (the outbox retries it); calls failing with no success in between for `degraded_after`
seconds make the platform degraded, with the last reason. One log line says so, and one
when a call succeeds again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class ApiHealth:
    platform: str
    degraded_after: float = 60.0  # seconds of failures with no success in between
    _failing_since: float | None = field(default=None, init=False)
    _reason: str = field(default="", init=False)
    _said: bool = field(default=False, init=False)

    def succeeded(self) -> None:
        if self._said:
            log.info("%s API answers again (after %s)", self.platform, self._reason)
        self._failing_since, self._said = None, False

    def failed(self, reason: str) -> None:
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
        self._reason = reason
        self.status()

    def status(self) -> tuple[bool, str]:
        """(True, "") while the API answers; (False, why) once it has failed for a while."""
        if self._failing_since is None:
            return True, ""
        failing = time.monotonic() - self._failing_since
        if failing < self.degraded_after:
            return True, ""
        if not self._said:
            self._said = True
            log.warning(
                "%s API has been failing for %.0f s (%s)", self.platform, failing, self._reason
            )
        return False, f"degraded: API failing for {failing:.0f} s ({self._reason})"
