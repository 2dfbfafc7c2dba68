"""PostgreSQL for what runs on several hosts must share exactly: the per-call cache, its leases
and the rate limits (`--database`, the sweep file's `database`, or PROACTFLOW_DATABASE).

The URL names user, host, port and database; the password comes only from libpq's conventions
(PGPASSWORD, ~/.pgpass), which asyncpg honours, so the URL is never a secret worth stealing and
one that holds a password (or a query parameter naming one, such as `sslpassword`) is refused.
Run records and Prefect's parameters hold it as given, user name included (a deployment's
worker connects with it); the console and logs show it redacted, like an endpoint URL.

A process has one `Database` per URL and event loop, shared by its call stores and pacers: a
small pool for reads, writes and rate-limit bookings, and one dedicated connection holding every
lease of the process as a session-level advisory lock. When the process dies, on any host, the
server ends that session and frees its leases at once (a vanished host: within the TCP
keepalive time set below, about 25 s). A statement that can run twice to the same effect (a
lookup, a first-writer-wins insert, a lock tried) runs once more on a new connection when its
own was lost under it (a lock to give back went with the lost one), so a server restart or a
killed backend costs a stage no call it paid for.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import weakref
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, TypeVar
from urllib.parse import parse_qsl, urlsplit

from .cancellation import undone_if_cancelled
from .errors import UserError
from .postgres_errors import CONNECT_TIMEOUT_S, connection_lost, translated, where
from .postgres_schema import ensure_schema
from .redaction import redact_url

if TYPE_CHECKING:
    import asyncpg

DATABASE_ENV = "PROACTFLOW_DATABASE"
POOL_SIZE = 4
"""Connections for reads, writes and bookings: each takes well under a millisecond on a LAN, so
four serve hundreds of calls in flight."""
T = TypeVar("T")
_generations = itertools.count(1)
_KEEPALIVE = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5",
              "tcp_keepalives_count": "3"}


def default_database() -> str | None:
    return os.environ.get(DATABASE_ENV) or None


def check_database_url(url: str) -> str:
    """`url` when it is a PostgreSQL URL without a password; else a one-line UserError."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise UserError(f"the database must be a postgresql://user@host:port/db URL, got "
                        f"{redact_url(url)!r}")
    if parts.password is not None or any("password" in name.lower()  # sslpassword too
                                         for name, _ in parse_qsl(parts.query)):
        raise UserError("the database URL must not hold a password: give it in PGPASSWORD or "
                        "~/.pgpass (libpq's conventions) instead")
    if parts.username == "***":
        # It came back through Prefect's parameters, which show it redacted.
        full = default_database()
        if full and redact_url(full) == url:
            return full
        raise UserError(f"the database URL {url} arrived redacted: set {DATABASE_ENV} to the "
                        "full URL where this flow runs")
    return url


class Database:
    """The connections of this process to one database (see the module's docstring). Use
    `attach` and `detach`, which share one per URL and event loop."""

    def __init__(self, url: str):
        self.url = url
        self.where = where(url)
        self.users = 0
        self.held: dict[int, int] = {}
        """Lock ids this process holds -> the generation of the lock connection holding it."""
        self._pool: asyncpg.Pool | None = None
        self._locks: asyncpg.Connection | None = None
        self._generation = 0
        self._lock_turn = asyncio.Lock()
        self._starting = asyncio.Lock()

    @contextlib.contextmanager
    def translated(self) -> Iterator[None]:
        """Connection and server errors as one line naming host:port/database."""
        with translated(self.where):
            yield

    async def start(self) -> None:
        async with self._starting:
            if self._pool is not None:
                return
            with self.translated():
                try:
                    pool = await self._connect()
                except Exception as exc:
                    # Connected, then lost (not refused: that would only be refused again).
                    if isinstance(exc, OSError) or not connection_lost(exc):
                        raise
                    pool = await self._connect()  # the schema's statements can run twice
            self._pool = pool

    async def _connect(self) -> asyncpg.Pool:
        import asyncpg

        pool = await asyncpg.create_pool(
            self.url, min_size=1, max_size=POOL_SIZE, timeout=CONNECT_TIMEOUT_S,
            server_settings={"application_name": "proactflow"})
        try:
            async with pool.acquire() as connection:
                await ensure_schema(connection)
        except BaseException:
            pool.terminate()
            raise
        return pool

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("Database used before start()")
        return self._pool

    async def fetchval(self, query: str, *args: Any, idempotent: bool = False) -> Any:
        """`query`'s value; an `idempotent` one runs again on a new connection when the
        connection was lost under it (a server restart, a killed backend, a network blip)."""
        return await self._pooled(lambda: self.pool.fetchval(query, *args), idempotent)

    async def fetch(self, query: str, *args: Any, idempotent: bool = False) -> list[Any]:
        return await self._pooled(lambda: self.pool.fetch(query, *args), idempotent)

    async def _pooled(self, statement: Callable[[], Awaitable[T]], idempotent: bool) -> T:
        with self.translated():
            try:
                return await statement()
            except Exception as exc:
                if not (idempotent and connection_lost(exc)):
                    raise
            # The pool's other idle connections may be gone too (a restarted server): new ones.
            await self.pool.expire_connections()
            return await statement()

    # Leases: advisory locks on the one connection that holds them all.

    async def _lock_connection(self) -> asyncpg.Connection:
        import asyncpg

        if self._locks is None or self._locks.is_closed():
            # Locks held on a lost connection are gone with it: a new generation.
            self._locks = await asyncpg.connect(
                self.url, timeout=CONNECT_TIMEOUT_S,
                server_settings={"application_name": "proactflow leases", **_KEEPALIVE})
            # Unique in the process: a slot taken on a closed Database's connection is never
            # given back on a later Database's.
            self._generation = next(_generations)
        return self._locks

    async def _on_locks(self, query: str, *args: Any, retry: bool) -> Any:
        """`query` on the leases' connection, with `_lock_turn` held; when that connection
        was lost under it, the query runs once more on a new one if `retry` (its locks went with
        the old one: a new generation), else its value is None."""
        with self.translated():
            connection = await self._lock_connection()
            try:
                return await connection.fetchval(query, *args)
            except Exception as exc:
                if not connection_lost(exc):
                    raise
                connection.terminate()  # its state is unknown: none of its locks is kept
                if not retry:
                    return None
            return await (await self._lock_connection()).fetchval(query, *args)

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
                taken = await self._on_locks("SELECT pg_try_advisory_lock($1)", lock_id,
                                             retry=True)
        except BaseException:
            self.held.pop(lock_id, None)
            raise
        if taken:
            self.held[lock_id] = self._generation
        else:
            del self.held[lock_id]
        return bool(taken)

    async def keep_lock(self, lock_id: int) -> None:
        """Take the lease again if the connection that held it was lost, unless it was given
        back meanwhile; if another process took it, carry on: its answer or ours, the first
        stored wins."""
        # Shielded: a renewal cancelled mid-round trip still records or gives back its lock.
        await asyncio.shield(self._keep_lock(lock_id))

    async def _keep_lock(self, lock_id: int) -> None:
        if self._kept(lock_id):
            return
        async with self._lock_turn:
            if self._kept(lock_id):
                return
            if await self._on_locks("SELECT pg_try_advisory_lock($1)", lock_id, retry=True):
                if self.held.get(lock_id, -1) == -1:  # given back during the round trip
                    await self._on_locks("SELECT pg_advisory_unlock($1)", lock_id, retry=False)
                else:
                    self.held[lock_id] = self._generation

    def _kept(self, lock_id: int) -> bool:
        """Whether the lease needs no renewal: held on the live connection, or not ours (given
        back, or still being taken)."""
        generation = self.held.get(lock_id, -1)
        return generation == -1 or generation == self._generation and \
            self._locks is not None and not self._locks.is_closed()

    async def unlock(self, lock_id: int) -> None:
        generation = self.held.pop(lock_id, None)

        async def unlock() -> None:
            async with self._lock_turn:
                if generation == self._generation and self._locks is not None \
                        and not self._locks.is_closed():
                    # A lost connection took the lock with it: nothing to give back.
                    await self._on_locks("SELECT pg_advisory_unlock($1)", lock_id, retry=False)

        # Shielded: a cancelled call still gives its lease back.
        await asyncio.shield(unlock())

    async def lock_query(self, query: str, *args: Any, of: int | None = None) -> tuple[Any, int]:
        """`query` on the leases' connection (slots die with it too), and its generation; a
        query for connection `of` is not run once that connection is gone, and its locks with
        it."""
        async with self._lock_turn:
            if of is not None and of != self._generation:
                return None, self._generation
            value = await self._on_locks(query, *args, retry=of is None)
            return value, self._generation

    async def close(self) -> None:
        if self._locks is not None:
            await self._locks.close()
        if self._pool is not None:
            await self._pool.close()
        self._locks = self._pool = None
        self.held.clear()


_open: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Database]] = \
    weakref.WeakKeyDictionary()


def attached(url: str) -> Database | None:
    """The Database of this process for `url` on the running event loop, if a store uses it."""
    return _open.get(asyncio.get_running_loop(), {}).get(url)


async def attach(url: str) -> Database:
    """The Database of this process for `url` on the running event loop, started."""
    by_url = _open.setdefault(asyncio.get_running_loop(), {})
    database = by_url.get(url)
    if database is None:
        database = by_url[url] = Database(url)
    database.users += 1
    try:
        await database.start()
    except BaseException:
        await detach(database)
        raise
    return database


async def detach(database: Database) -> None:
    database.users -= 1
    if database.users == 0:
        by_url = _open.get(asyncio.get_running_loop(), {})
        if by_url.get(database.url) is database:
            del by_url[database.url]
        await database.close()
