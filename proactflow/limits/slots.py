"""The slots of a model shared by the processes calling it (see inflight.py), where the runs'
leases live:

- `SlotFile` (a local store): byte `i` of one file in the store's `coordination/slots/` is slot
  `i`, held as a POSIX record lock (`lockf`, non-blocking). The kernel frees the locks of a
  process however it ends (`kill -9` included); a try is a system call, no round trip.
- `PostgresSlots` (`--database`): slot `i` is the advisory lock (model's id, i) on the
  connection that holds the process's leases (postgres.py), so the server frees it when the
  holder dies, on any host. One round trip takes the first free slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import threading
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

from ..common.postgres import attached

if TYPE_CHECKING:
    from ..common.postgres import Database

class Slots(Protocol):
    pause: tuple[float, float]
    """Shortest and longest pause between two tries of a waiting process, seconds: short, so
    that a waiter finds a slot freed by a busy process before that process takes it again."""

    async def take(self, count: int) -> bool:
        """Take one of slots 0..count-1 if one is free; False when others hold them all."""
        ...

    def give_back(self) -> None:
        """Free one slot this process holds (at once, or as soon as the server hears of it)."""
        ...

    async def settled(self) -> None:
        """Return once every slot given back is free for other processes too."""
        ...


class SlotFile:
    """Slots as byte-range locks on one file, for the processes of one host. One per file and
    process (`slot_file`): POSIX locks belong to the process, and closing any descriptor of the
    file would drop them all, so it is opened once and never closed."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._held: list[int] = []
        self._mine: set[int] = set()
        self._next = 0
        self._freed: int | None = None
        self._guard = threading.Lock()  # clients on event loops of other threads share it
        self.pause = (0.002, 0.01)  # a try is a few system calls

    async def take(self, count: int) -> bool:
        with self._guard:
            # The slot given back last is tried first: a process that has just finished a call
            # finds it free in one try instead of probing, one system call each, the slots that
            # other processes hold (at a model's limit, most of them).
            freed, self._freed = self._freed, None
            first = [freed] if freed is not None and freed < count else []
            for slot in chain(first, ((self._next + step) % count for step in range(count))):
                if slot in self._mine:  # our own lock would be granted again: not a free slot
                    continue
                try:
                    fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, slot)
                except OSError:  # held by another process
                    continue
                self._held.append(slot)
                self._mine.add(slot)
                self._next = slot + 1
                return True
        return False

    def give_back(self) -> None:
        with self._guard:
            slot = self._held.pop()
            self._mine.discard(slot)
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, slot)
            self._freed = slot

    async def settled(self) -> None:
        """Nothing to wait for: a lock is given back at once."""


_files: dict[Path, SlotFile] = {}
_files_guard = threading.Lock()


def slot_file(path: Path) -> SlotFile:
    with _files_guard:
        found = _files.get(path)
        if found is None:
            found = _files[path] = SlotFile(path)
        return found


def _int32(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big", signed=True)


class PostgresSlots:
    """Slots as two-key advisory locks (a space apart from the leases' one-key locks) on the
    lease connection of the process's Database for `url` (postgres.py). They go with that
    Database, not with the store that first used them: a store closed since is never attached
    again (its connections would stay open after every store had closed). `store_database`
    attaches one (the last store that asked for these slots) when no store has yet."""

    def __init__(self, url: str, store_database: Callable[[], Awaitable[Database]],
                 target: str):
        self._url = url
        self.store_database = store_database
        self._space = _int32(f"proactflow slots|{target}")
        self._held: list[tuple[int, int]] = []
        """(slot, generation of the lock connection that took it)."""
        self._next = 0
        self._unlocking: set[asyncio.Task[None]] = set()
        self._taking = asyncio.Lock()
        self.pause = (0.01, 0.03)  # a try is a round trip

    async def take(self, count: int) -> bool:
        taking = asyncio.ensure_future(self._take(count))
        try:
            return await asyncio.shield(taking)
        except asyncio.CancelledError:
            # The lock may be granted after all: given back once the answer arrives.
            taking.add_done_callback(self._forget)
            raise

    async def _take(self, count: int) -> bool:
        async with self._taking:  # two tries at once could both be granted one slot we free
            # A session is granted its own advisory lock again: ask only for slots not ours.
            mine = {slot for slot, _ in self._held}
            free = [s for s in ((self._next + i) % count for i in range(count)) if s not in mine]
            if not free:
                return False
            database = attached(self._url) or await self.store_database()
            slot, generation = await database.lock_query(
                "SELECT s FROM unnest($2::int[]) AS s WHERE pg_try_advisory_lock($1, s) LIMIT 1",
                self._space, free)
            if slot is None:
                return False
            self._held.append((slot, generation))
            self._next = slot + 1
            return True

    def _forget(self, taking: asyncio.Future[bool]) -> None:
        if not taking.cancelled() and taking.exception() is None and taking.result():
            self.give_back()

    def give_back(self) -> None:
        slot, generation = self._held.pop()

        async def unlock() -> None:
            database = attached(self._url)
            if database is None:  # every store closed, and the connection with its locks
                return
            # Only on the connection that took it: a lost connection took its locks along, so
            # a failure here leaves nothing held (and a task's error would go unheard).
            with contextlib.suppress(Exception):
                await database.lock_query("SELECT pg_advisory_unlock($1, $2)", self._space,
                                          slot, of=generation)

        # A task, so that release stays synchronous. Taking this slot again before the unlock
        # runs is safe: the session then holds it twice, and the unlock leaves it held once.
        task = asyncio.get_running_loop().create_task(unlock())
        self._unlocking.add(task)
        task.add_done_callback(self._unlocking.discard)

    async def settled(self) -> None:
        await asyncio.gather(*self._unlocking, return_exceptions=True)
