"""PostgreSQL for what runs on several hosts must share exactly: the per-call cache, its leases
and the rate limits (`--database`, the sweep file's `database`, or PROACTFLOW_DATABASE).

The URL names user, host, port and database; the password comes only from libpq's conventions
(PGPASSWORD, ~/.pgpass), which asyncpg honours, so the URL is never a secret worth stealing and
one that holds a password (or a query parameter naming one, such as `sslpassword`) is refused.
Run records and Prefect's parameters hold it as given, user name included (a deployment's
worker connects with it); the console and logs show it redacted, like an endpoint URL.

A process has one `Database` per URL and event loop, shared by its call stores and pacers: a
small pool for reads, writes and rate-limit bookings, and one dedicated connection holding every
lease of the process as a session-level advisory lock, and a row naming its holder
(postgres_leases.py). When the process dies, on any host, the server ends that session and its
leases are free for others after a short grace (a vanished host: within the TCP keepalive time
set there, about 25 s). Every statement can run twice to the same effect (a lookup, a
first-writer-wins insert, a lock tried, a pacer's booking by its id): when its connection is
lost under it, it runs again on a new one, waiting with backoff while the database is away for
up to `--database-wait` (postgres_wait.py), so a server restart, a failover or a killed backend
costs a stage no call it paid for. A database that is down when the run starts is one line,
before any call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, TypeVar
from urllib.parse import parse_qsl, urlsplit

from .errors import UserError
from .postgres_errors import (CONNECT_TIMEOUT_S, connection_lost, quiet_asyncpg_cancel_noise,
                              reason, translated, where)
from .postgres_leases import LeaseHolding
from .postgres_schema import ensure_schema
from .postgres_wait import Outage, database_wait
from .redaction import redact_url

if TYPE_CHECKING:
    import asyncpg

DATABASE_ENV = "PROACTFLOW_DATABASE"
POOL_SIZE = 4
"""Connections for reads, writes and bookings: each takes well under a millisecond on a LAN, so
four serve hundreds of calls in flight."""
T = TypeVar("T")


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


class Database(LeaseHolding):
    """The connections of this process to one database (see the module's docstring). Use
    `attach` and `detach`, which share one per URL and event loop."""

    def __init__(self, url: str):
        self.url = url
        self.where = where(url)
        self.users = 0
        self._pool: asyncpg.Pool | None = None
        self._starting = asyncio.Lock()
        self._outage = Outage(self.where, database_wait())
        self._init_leases()

    @contextlib.contextmanager
    def translated(self) -> Iterator[None]:
        """Connection and server errors as one line naming host:port/database."""
        with translated(self.where):
            yield

    async def start(self) -> None:
        async with self._starting:
            if self._pool is not None:
                return
            quiet_asyncpg_cancel_noise(asyncio.get_running_loop())
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

        # No floor of connections: asyncpg would restore one in the background after a
        # restart and log each failed try with a traceback; a statement connects as it needs.
        pool = await asyncpg.create_pool(
            self.url, min_size=0, max_size=POOL_SIZE, timeout=CONNECT_TIMEOUT_S,
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
        connection was lost under it (a server restart, a killed backend, a network blip),
        while the database is away for up to the bounded wait (postgres_wait.py)."""
        return await self._pooled(lambda: self.pool.fetchval(query, *args), idempotent)

    async def fetch(self, query: str, *args: Any, idempotent: bool = False) -> list[Any]:
        return await self._pooled(lambda: self.pool.fetch(query, *args), idempotent)

    async def _pooled(self, statement: Callable[[], Awaitable[T]], idempotent: bool) -> T:
        attempt = 0
        while True:
            try:
                value = await statement()
            except Exception as exc:
                if not (idempotent and connection_lost(exc)):
                    with self.translated():
                        raise
                attempt += 1
                await self._outage.pause(attempt, reason(exc))
                # The pool's other idle connections may be gone too (a restarted server).
                with contextlib.suppress(Exception):
                    await self.pool.expire_connections()
                continue
            self._outage.over()
            return value

    async def close(self) -> None:
        await self._close_leases()
        if self._pool is not None:
            await self._pool.close()
        self._pool = None


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


def check_reachable(url: str) -> None:
    """Connect to the database at `url` once (its tables made if new) and let go: a database
    that is down, or refuses the user or the password, is one line here (a UserError naming
    host:port/database), before anything runs on it, not a failure of everything after."""
    async def connect() -> None:
        database = Database(url)
        try:
            await database.start()
        finally:
            await database.close()

    asyncio.run(connect())
