"""Calls in flight to one model, at most its `concurrency` together across every run that calls
it: in one process, on one host sharing a store, or on every host sharing a database.

A call takes two things, in this order:

1. a place in the process's `AdaptiveLimit` for the model (one per model@endpoint and event
   loop, shared by every client of the process: two evaluations of a sweep that call one judge
   wait in one queue). It costs no I/O, and it keeps the 429 back-off: a call waiting here never
   touches the shared slots.
2. one of the model's `concurrency` slots shared by the processes (slots.py): a byte-range lock
   on a file of the store's `coordination/` folder, or an advisory lock in the database; freed
   by the kernel or the server when the holder dies.

When every slot is taken by other processes, one waiter per model and process polls, a few
milliseconds apart (`Slots.pause`), and the others wait in the process without I/O. Polling
that often matters: a busy process takes a freed slot back as soon as its own next call gets
there, so a waiter that slept for 50 ms at a time was measured to wait until the other run had
finished. Slots are interchangeable, so a release gives back any one this process holds;
releasing is synchronous on every path.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import weakref
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .ratelimit import AdaptiveLimit
from .slots import PostgresSlots, Slots, slot_file

if TYPE_CHECKING:
    from ..cache.calls import CallStore


class ModelLimit:
    """What a ChatClient waits on before each HTTP attempt: the process's adaptive limit of the
    model, then a shared slot. Same interface as AdaptiveLimit."""

    def __init__(self, ceiling: int, slots: Slots, share: int | None = None):
        self.local = AdaptiveLimit(min(share or ceiling, ceiling))
        self.slot_count = ceiling
        """The model's concurrency: the slots counted across processes (the local limit may
        be this process's share of them)."""
        self._slots = slots
        self._polling = asyncio.Lock()

    @property
    def ceiling(self) -> int:
        return self.local.ceiling

    @property
    def peak(self) -> int:
        return self.local.peak

    @property
    def lowest(self) -> int:
        return self.local.lowest

    async def acquire(self) -> float:
        started = await self.local.acquire()
        try:
            if not await self._slots.take(self.slot_count):
                await self._wait()
        except BaseException:
            self.local.release(started)
            raise
        return started

    async def _wait(self) -> None:
        async with self._polling:  # one waiter polls; the rest queue here, without I/O
            while not await self._slots.take(self.slot_count):
                await asyncio.sleep(random.uniform(*self._slots.pause))

    def release(self, started: float, *, rate_limited: bool = False) -> None:
        try:
            self._slots.give_back()
        finally:
            self.local.release(started, rate_limited=rate_limited)

    async def settled(self) -> None:
        """Return once every slot given back is free for other processes too."""
        await self._slots.settled()


_limits: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop,
                                   weakref.WeakValueDictionary[str, ModelLimit]] = \
    weakref.WeakKeyDictionary()


def model_limit(target: str, ceiling: int, calls: CallStore, coordination: Path | str,
                share: int | None = None) -> ModelLimit:
    """The in-flight limit of `target` (model@endpoint) for this process's clients on the
    running event loop, with slots shared where `calls` keeps its leases: its database, or
    the store's `coordination` folder. It lives as long as a client holds it; when two clients
    give different ceilings (or shares), the lower one holds for both."""
    from ..cache.calls_postgres import PostgresCallStore

    new: Callable[[], Slots]
    if isinstance(calls, PostgresCallStore):
        key, new = f"{target}|{calls.url}", partial(PostgresSlots, calls.url, calls.database,
                                                    target)
    else:
        name = hashlib.sha256(target.encode()).hexdigest()[:32]
        path = Path(coordination).resolve() / "slots" / f"{name}.lock"
        key, new = f"{target}|{path}", partial(slot_file, path)
    by_target = _limits.setdefault(asyncio.get_running_loop(), weakref.WeakValueDictionary())
    limit = by_target.get(key)
    if limit is None:
        limit = by_target[key] = ModelLimit(ceiling, new(), share)
    else:
        if isinstance(limit._slots, PostgresSlots) and isinstance(calls, PostgresCallStore):
            limit._slots.store_database = calls.database  # the newest store: the likeliest open
        limit.slot_count = min(limit.slot_count, ceiling)
        if min(share or ceiling, ceiling) < limit.ceiling:
            limit.local.cap(min(share or ceiling, ceiling))
    return limit
