"""Waiting for a database that went away mid-run (a restart, a failover, a network blip): how
long (`--database-wait`, $PROACTFLOW_DATABASE_WAIT), how often to try again, and the line that
says so. A database that is down before the run starts is not waited for: that is one line
before any call (postgres.py)."""

from __future__ import annotations

import asyncio
import random
import sys
import time

from .environment import seconds_from_environment
from .errors import DatabaseLost

DATABASE_WAIT_ENV = "PROACTFLOW_DATABASE_WAIT"
DEFAULT_WAIT_S = 120.0
"""Long enough for a restart (under a second) and a managed failover (typically 30-60 s)."""
ANNOUNCE_AFTER_S = 3.0
"""A blip shorter than this goes unsaid; a longer wait says what it waits for, and for how
long."""
_FIRST_PAUSE_S, _LONGEST_PAUSE_S = 0.05, 0.5


def database_wait() -> float:
    """Seconds to wait for a database that went away ($PROACTFLOW_DATABASE_WAIT, which
    `--database-wait` sets for the run and its child processes); a one-line UserError if it is
    not a number of seconds."""
    return seconds_from_environment(DATABASE_WAIT_ENV, DEFAULT_WAIT_S, zero_allowed=True,
                                    expected="give a number of seconds (0 or more)")


class Outage:
    """The database of one process being away: every statement that may run again waits in
    the same outage (one deadline, one line said), however many are waiting."""

    def __init__(self, place: str, wait_s: float):
        self.place = place
        self.wait_s = wait_s
        self._started: float | None = None
        self._announced = False

    async def pause(self, attempt: int, why: str) -> None:
        """Sleep before try `attempt` (1, 2, ...) after a lost connection explained by `why`;
        DatabaseLost once the outage has lasted longer than the wait."""
        now = time.monotonic()
        if self._started is None:
            self._started = now
        waited = now - self._started
        if waited >= self.wait_s:
            raise DatabaseLost(
                f"database {self.place} went away mid-run ({why.split(': is ')[0]}) and was "
                f"not back within {self.wait_s:g} s "
                f"(--database-wait): stopped. Answers paid for are kept on this host and reach "
                f"the database on the next run, which pays nothing for them")
        if waited >= ANNOUNCE_AFTER_S and not self._announced:
            self._announced = True
            print(f"proactflow: database {self.place} went away mid-run "
                  f"({why.split(': is ')[0]}): waiting up to {self.wait_s:g} s for it to come "
                  f"back (--database-wait)", file=sys.stderr, flush=True)
        pause = min(_LONGEST_PAUSE_S, _FIRST_PAUSE_S * 2 ** min(attempt - 1, 10))
        await asyncio.sleep(min(random.uniform(pause / 2, pause), self.wait_s - waited))

    def over(self) -> None:
        """A statement went through: the outage, if any, is over."""
        if self._started is None:
            return
        if self._announced:
            print(f"proactflow: database {self.place} is back after "
                  f"{time.monotonic() - self._started:.1f} s", file=sys.stderr, flush=True)
        self._started, self._announced = None, False
