"""The leases of one process in PostgreSQL (see postgres.py): session-level advisory locks on
the one connection that holds them all, and a row per lease naming its holder.

The lock frees a lease the moment its holder's session ends; the row keeps it from being taken
while the holder is only reconnecting. A holder is "present" while it holds the advisory lock
(PRESENCE_SPACE, its id) on its leases' connection. When that connection is lost (a killed
backend, a restart, a failover), the holder connects again at once and, in one statement, is
present again and takes back every lease it held (`proactflow_rejoin`). Another process that
finds a lease free but named for a holder that is not present waits `LEASE_GRACE_S`, measured
by itself from the moment it first saw the holder absent, before taking it over: a holder that
died loses its leases after that grace; one that lives and reconnects within it keeps them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from .cancellation import shielded, undone_if_cancelled
from .postgres_errors import CONNECT_TIMEOUT_S, connection_lost, reason

if TYPE_CHECKING:
    import asyncpg

    from .postgres_wait import Outage

T = TypeVar("T")
LEASE_GRACE_S = 3.0
"""How long a lease stays reserved for a holder that lost its connection: it reconnects in
milliseconds after a killed backend and within a second of a restarted server accepting again."""
_generations = itertools.count(1)
_KEEPALIVE = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5",
              "tcp_keepalives_count": "3"}
_CLAIM = "SELECT proactflow_claim($1, $2, $3)"


class LeaseHolding:
    """The leases' connection of a Database (a mixin: Database gives the URL, the outage and
    `translated`)."""

    url: str
    _outage: Outage
    translated: Callable[[], contextlib.AbstractContextManager[None]]

    def _init_leases(self) -> None:
        self.holder = random.randrange(1, 2 ** 31 - 1)
        """This process's id in the lease rows and its presence lock."""
        self.held: dict[int, int] = {}
        """Lock ids this process holds -> the generation of the lock connection holding it."""
        self._locks: asyncpg.Connection | None = None
        self._generation = 0
        self._lock_turn = asyncio.Lock()
        self._absent: dict[tuple[int, int], float] = {}
        """(lock id, its holder) -> when this process first saw that holder absent."""
        self._restoring: asyncio.Task[None] | None = None
        self._leases_closed = False

    async def _lock_connection(self) -> asyncpg.Connection:
        import asyncpg

        if self._locks is None or self._locks.is_closed():
            connection = await asyncpg.connect(
                self.url, timeout=CONNECT_TIMEOUT_S,
                server_settings={"application_name": "proactflow leases", **_KEEPALIVE})
            # Locks held on a lost connection are gone with it: present again, and every lease
            # taken back at once, before any other process's next try.
            ours = [lock_id for lock_id, generation in self.held.items() if generation != -1]
            try:
                kept = await connection.fetchval("SELECT proactflow_rejoin($1, $2::bigint[])",
                                                 self.holder, ours)
            except BaseException:
                connection.terminate()
                raise
            self._locks = connection
            # Unique in the process: a slot taken on a closed Database's connection is never
            # given back on a later Database's.
            self._generation = next(_generations)
            for lock_id in kept:
                if self.held.get(lock_id, -1) != -1:
                    self.held[lock_id] = self._generation
            self._absent.clear()  # seen absent while this process was away: look again
            loop = asyncio.get_running_loop()
            connection.add_termination_listener(lambda lost: self._on_lost(loop, lost))
        return self._locks

    def _on_lost(self, loop: asyncio.AbstractEventLoop, lost: Any) -> None:
        """The leases' connection ended: connect again at once if a lease or slot is held."""
        if self._leases_closed or lost is not self._locks or loop.is_closed():
            return
        if self._restoring is None or self._restoring.done():
            self._restoring = loop.create_task(self._restore())

    async def _restore(self) -> None:
        try:
            async with self._lock_turn:
                with self.translated():
                    await self._connected_locks()
        except Exception:  # the next statement on the leases' connection says why
            pass

    async def _connected_locks(self) -> asyncpg.Connection:
        """The leases' connection, waiting (a bounded wait) while the database is away."""
        attempt = 0
        while True:
            try:
                connection = await self._lock_connection()
            except Exception as exc:
                if not connection_lost(exc):
                    raise
                attempt += 1
                await self._outage.pause(attempt, reason(exc))
                continue
            self._outage.over()
            return connection

    async def _on_locks(self, statement: Callable[[asyncpg.Connection], Awaitable[T]],
                        retry: bool) -> T | None:
        """`statement` on the leases' connection, with `_lock_turn` held. When that connection
        is lost under it, its locks went with it; the statement runs again on a new one if
        `retry` (waiting while the database is away), else its value is None."""
        with self.translated():
            attempt = 0
            while True:
                connection = await self._connected_locks()
                try:
                    return await statement(connection)
                except Exception as exc:
                    if not connection_lost(exc):
                        raise
                    connection.terminate()  # its state is unknown: none of its locks is kept
                    if not retry:
                        return None
                    attempt += 1
                    if attempt > 1:
                        await self._outage.pause(attempt, reason(exc))

    async def _claim(self, lock_id: int) -> bool:
        """One try at a lease, with `_lock_turn` held."""
        outcome = await self._on_locks(
            lambda c: c.fetchval(_CLAIM, lock_id, self.holder, None), retry=True)
        if outcome is not None and outcome > 0:  # free, but its holder may be reconnecting
            absent_since = self._absent.setdefault((lock_id, outcome), time.monotonic())
            if time.monotonic() - absent_since < LEASE_GRACE_S:
                return False
            outcome = await self._on_locks(
                lambda c: c.fetchval(_CLAIM, lock_id, self.holder, outcome), retry=True)
        if outcome == 0:
            for absent in [a for a in self._absent if a[0] == lock_id]:
                del self._absent[absent]
        return outcome == 0

    async def try_lock(self, lock_id: int) -> bool:
        """Take a lease unless another session, or another task of this process, holds it. A
        caller cancelled meanwhile gives back a lease the server granted after all."""
        if lock_id in self.held:
            return False
        self.held[lock_id] = -1  # reserved while the round trip runs
        return await undone_if_cancelled(
            self._try_lock(lock_id), lambda taken: self.unlock(lock_id) if taken else None)

    async def _try_lock(self, lock_id: int) -> bool:
        try:
            async with self._lock_turn:
                taken = await self._claim(lock_id)
        except BaseException:
            self.held.pop(lock_id, None)
            raise
        if taken:
            self.held[lock_id] = self._generation
        else:
            del self.held[lock_id]
        return taken

    async def keep_lock(self, lock_id: int) -> None:
        """Take the lease again if the connection that held it was lost (and reconnecting did
        not take it back), unless it was given back meanwhile; if another process took it,
        carry on: its answer or ours, the first stored wins."""
        # Shielded: a renewal cancelled mid-round trip still records or gives back its lock.
        await shielded(self._keep_lock(lock_id))

    async def _keep_lock(self, lock_id: int) -> None:
        if self._kept(lock_id):
            return
        async with self._lock_turn:
            if self._kept(lock_id):
                return
            if await self._claim(lock_id):
                if self.held.get(lock_id, -1) == -1:  # given back during the round trip
                    await self._release(lock_id, self._generation)
                else:
                    self.held[lock_id] = self._generation

    def _kept(self, lock_id: int) -> bool:
        """Whether the lease needs no renewal: held on the live connection, or not ours (given
        back, or still being taken)."""
        generation = self.held.get(lock_id, -1)
        return generation == -1 or generation == self._generation and \
            self._locks is not None and not self._locks.is_closed()

    async def _release(self, lock_id: int, generation: int) -> None:
        # Safe to repeat on a new connection: its row is deleted, and the lock is given back
        # only on the connection that took it (a lost one took it along).
        await self._on_locks(lambda c: c.fetchval(
            "SELECT proactflow_release($1, $2, $3)", lock_id, self.holder,
            generation == self._generation and c is self._locks), retry=True)

    async def unlock(self, lock_id: int) -> None:
        generation = self.held.pop(lock_id, None)

        async def unlock() -> None:
            if generation is None or generation == -1 or self._leases_closed:
                return
            async with self._lock_turn:
                await self._release(lock_id, generation)

        # Shielded: a cancelled call still gives its lease back.
        await shielded(unlock())

    async def lock_query(self, query: str, *args: Any, of: int | None = None) -> tuple[Any, int]:
        """`query` on the leases' connection (slots die with it too), and its generation; a
        query for connection `of` is not run once that connection is gone, and its locks with
        it."""
        async with self._lock_turn:
            if of is not None and of != self._generation:
                return None, self._generation
            value = await self._on_locks(lambda c: c.fetchval(query, *args), retry=of is None)
            return value, self._generation

    async def _close_leases(self) -> None:
        self._leases_closed = True
        if self._restoring is not None:
            self._restoring.cancel()
            await asyncio.gather(self._restoring, return_exceptions=True)
        if self._locks is not None:
            if not self._locks.is_closed():
                with contextlib.suppress(Exception):  # rows no other process need wait for
                    await self._locks.execute("DELETE FROM proactflow_leases WHERE holder = $1",
                                              self.holder)
            await self._locks.close()
        self._locks = None
        self.held.clear()
