"""Rate limits per model that hold across every process sharing one store.

A pacer keeps, in the store's coordination database, the earliest time the next call to a model
may start. Each call books `cost` units (one request, or its estimated tokens) by moving that time
forward by `cost × 60 / per_minute` seconds in one SQLite transaction, then sleeps until its slot.
Two flows evaluating the same model thus share one budget instead of each using all of it. Booking
is a single local transaction (well under a millisecond), unlike a round trip to a server.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import diskcache


class SharedPacer:
    def __init__(self, directory: Path | str, name: str, per_minute: float):
        self._db = diskcache.Cache(str(directory), eviction_policy="none")
        self.name = name
        self.per_minute = per_minute
        self._seconds_per_unit = 60.0 / per_minute

    async def acquire(self, cost: float = 1.0) -> float:
        """Wait for a slot of `cost` units; returns the slot's start (epoch seconds)."""
        with self._db.transact():
            now = time.time()
            start = max(now, self._db.get(self.name, 0.0))
            self._db.set(self.name, start + cost * self._seconds_per_unit)
        if start > now:
            await asyncio.sleep(start - now)
        return start

    def settle(self, extra_cost: float) -> None:
        """Correct a booking once the real cost is known (negative gives time back)."""
        if not extra_cost:
            return
        with self._db.transact():
            booked = self._db.get(self.name, 0.0)
            self._db.set(self.name, max(time.time(), booked + extra_cost * self._seconds_per_unit))

    def close(self) -> None:
        self._db.close()
