"""Rate limits per model that hold across every process sharing one store (or one database),
and the adaptive limit on calls in flight that backs off when a provider answers 429.

A pacer keeps the earliest time the next call to a model may start. Each call books `cost` units
(one request, or its estimated tokens) by moving that time forward by `cost × 60 / per_minute`
seconds in one atomic step, then sleeps until its slot. Two flows evaluating the same model thus
share one budget instead of each using all of it. Where the time is kept:

- `SharedPacer`: the store's coordination database (SQLite), for the runs of one host. Booking
  is a local transaction well under a millisecond, so it runs in place on the event loop.
- `PostgresPacer` (`--database`): one row per bucket, booked by one UPDATE on the server's
  clock, so runs on every host share it exactly, whatever their clocks say.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

import diskcache

if TYPE_CHECKING:
    from ..cache.calls import CallStore
    from ..common.postgres import Database

SLOT_MARGIN = 1.01
"""Slots are spaced 1 % wider than the budget: a call starts a little after its slot (event-loop
lag, a busy host: up to 20 ms measured), by different amounts, and a provider counting a sliding
minute would otherwise see one call too many now and then (601 at 600 rpm, measured)."""


class Pacer(Protocol):
    name: str
    per_minute: float

    async def acquire(self, cost: float = 1.0) -> float:
        """Wait for a slot of `cost` units; returns the slot's start (epoch seconds)."""
        ...

    async def defer(self, seconds: float) -> None:
        """Push the next slot at least `seconds` into the future for every process sharing this
        budget (a provider's Retry-After)."""
        ...

    async def settle(self, extra_cost: float) -> None:
        """Correct a booking once the real cost is known (negative gives time back)."""
        ...

    async def close(self) -> None: ...


class SharedPacer:
    """A pacer in a local SQLite database (diskcache), shared by the processes of one host."""

    def __init__(self, directory: Path | str, name: str, per_minute: float):
        self._db = diskcache.Cache(str(directory), eviction_policy="none")
        self.name = name
        self.per_minute = per_minute
        self._seconds_per_unit = 60.0 * SLOT_MARGIN / per_minute

    async def acquire(self, cost: float = 1.0) -> float:
        with self._db.transact():
            now = time.time()
            start = max(now, self._db.get(self.name, 0.0))
            self._db.set(self.name, start + cost * self._seconds_per_unit)
        if start > now:
            await asyncio.sleep(start - now)
        return start

    async def defer(self, seconds: float) -> None:
        with self._db.transact():
            booked = self._db.get(self.name, 0.0)
            self._db.set(self.name, max(booked, time.time() + seconds))

    async def settle(self, extra_cost: float) -> None:
        if not extra_cost:
            return
        with self._db.transact():
            booked = self._db.get(self.name, 0.0)
            self._db.set(self.name, max(time.time(), booked + extra_cost * self._seconds_per_unit))

    async def close(self) -> None:
        self._db.close()


_NOW = "extract(epoch FROM clock_timestamp())::float8"
# A booking and a settlement are applied once by their id: run again after the connection was
# lost under them (the first run may have committed), they find their first result.
_BOOK = f"""
WITH prior AS (SELECT result FROM proactflow_applied WHERE operation = $3),
booked AS (
    UPDATE proactflow_pacer p SET next_at = GREATEST(c.now, p.next_at) + $2
    FROM (SELECT {_NOW} AS now) c
    WHERE p.bucket = $1 AND NOT EXISTS (SELECT 1 FROM prior)
    RETURNING p.next_at - $2 AS start_at),
noted AS (INSERT INTO proactflow_applied (operation, result) SELECT $3, start_at FROM booked)
SELECT COALESCE((SELECT result FROM prior), (SELECT start_at FROM booked)) - {_NOW}
"""
_SETTLE = f"""
WITH prior AS (SELECT 1 FROM proactflow_applied WHERE operation = $3),
settled AS (
    UPDATE proactflow_pacer SET next_at = GREATEST({_NOW}, next_at + $2)
    WHERE bucket = $1 AND NOT EXISTS (SELECT 1 FROM prior) RETURNING 0::float8 AS result)
INSERT INTO proactflow_applied (operation, result) SELECT $3, result FROM settled
"""
_PRUNE = "DELETE FROM proactflow_applied WHERE applied_at < now() - interval '1 hour'"
_PRUNE_EVERY = 1000
"""Operations of a process between two prunes of ids no retry can need any more (a retry
waits --database-wait at most)."""


class PostgresPacer:
    """A pacer in PostgreSQL: one row per bucket, every booking one atomic statement on the
    server's clock. It uses the connections of a call store (`database`), which owns them."""

    def __init__(self, database: Callable[[], Awaitable[Database]], name: str,
                 per_minute: float):
        self._database = database
        self.name = name
        self.per_minute = per_minute
        self._seconds_per_unit = 60.0 * SLOT_MARGIN / per_minute
        self._created = False
        self._operations = 0

    async def _db(self) -> Database:
        database = await self._database()
        if not self._created:
            await database.fetchval("INSERT INTO proactflow_pacer VALUES ($1, 0) "
                                    "ON CONFLICT DO NOTHING", self.name, idempotent=True)
            self._created = True
        self._operations += 1
        if self._operations % _PRUNE_EVERY == 0:
            await database.fetchval(_PRUNE, idempotent=True)
        return database

    async def acquire(self, cost: float = 1.0) -> float:
        units = cost * self._seconds_per_unit
        booking = uuid.uuid4()  # the same booking when run again after a lost connection
        wait = None
        while wait is None:  # None: the bucket's row was deleted under us; made again
            database = await self._db()
            wait = await database.fetchval(_BOOK, self.name, units, booking, idempotent=True)
            self._created = wait is not None
        start = time.time() + wait  # the server's clock placed the slot, whatever ours says
        if wait > 0:
            await asyncio.sleep(wait)
        return start

    async def defer(self, seconds: float) -> None:
        database = await self._db()
        # Run twice, it pushes the slot to the same moment (give or take the round trip).
        await database.fetchval(
            f"UPDATE proactflow_pacer SET next_at = GREATEST(next_at, {_NOW} + $2) "
            f"WHERE bucket = $1", self.name, float(seconds), idempotent=True)

    async def settle(self, extra_cost: float) -> None:
        if not extra_cost:
            return
        database = await self._db()
        await database.fetchval(_SETTLE, self.name, extra_cost * self._seconds_per_unit,
                                uuid.uuid4(), idempotent=True)

    async def close(self) -> None:
        """Nothing to close: the call store owns the connections."""


def open_pacer(calls: CallStore, directory: Path | str, name: str, per_minute: float) -> Pacer:
    """A pacer kept where `calls` keeps its leases: in its PostgreSQL database, shared by every
    host, or in the store's coordination folder `directory`, shared by the runs of this host."""
    from ..cache.calls_postgres import PostgresCallStore

    if isinstance(calls, PostgresCallStore):
        return PostgresPacer(calls.database, name, per_minute)
    return SharedPacer(directory, name, per_minute)


class InFlightLimit(Protocol):
    """Calls in flight to one model: AdaptiveLimit, or inflight.ModelLimit around it."""

    @property
    def ceiling(self) -> int: ...

    @property
    def peak(self) -> int: ...

    @property
    def lowest(self) -> int: ...

    async def acquire(self) -> float:
        """Wait for a place; the start time to hand back to `release`."""
        ...

    def release(self, started: float, *, rate_limited: bool = False) -> None: ...


class AdaptiveLimit:
    """Calls in flight to one model, at most `ceiling`: cut by a quarter when the provider
    answers 429, grown back by one per success.

    A burst of 429s from one wave of calls cuts the limit once, not once per 429: only a call
    that started after the last cut can cut it again. The cut is gentle and the regrowth quick on
    purpose: a provider's 429s also come from per-minute quotas that fewer calls in flight do not
    relieve (Retry-After and the shared pacer handle those), and scattered 429s must not starve
    a run. Releasing is synchronous, so a slot is given back on every path, cancellation
    included.
    """

    def __init__(self, ceiling: int):
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)
        self.in_flight = 0
        self.peak = 0
        self.lowest = self.ceiling
        """The lowest limit reached: how far the provider pushed back."""
        self._last_decrease = float("-inf")
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> float:
        """Wait for a slot; returns the start time to hand back to `release`."""
        if self.in_flight < int(self.limit) and not self._waiters:
            self._take()
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._give_back()  # the slot was handed over: passed on, no call made
                elif waiter in self._waiters:  # not yet popped by a release that skipped it
                    self._waiters.remove(waiter)
                raise
        return time.monotonic()

    def cap(self, ceiling: int) -> None:
        """Lower the ceiling (another client of the model gave a lower one)."""
        self.ceiling = max(1, min(self.ceiling, ceiling))
        self.limit = min(self.limit, float(self.ceiling))
        self.lowest = min(self.lowest, self.ceiling)

    def _take(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def release(self, started: float, *, rate_limited: bool = False) -> None:
        self.in_flight -= 1
        if rate_limited:
            if started > self._last_decrease:
                self.limit = max(1.0, self.limit * 0.75)
                self.lowest = min(self.lowest, int(self.limit))
                self._last_decrease = time.monotonic()
        elif self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + 1)
        self._wake()

    def _give_back(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_flight < int(self.limit):
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._take()
                waiter.set_result(None)
