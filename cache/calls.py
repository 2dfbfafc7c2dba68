"""Per-call response cache: every successful LLM call, keyed by the exact request.

An interrupted stage resumes from here without repeating a finished call. Every reply paid for is
stored: an answer under its request's key, a reply that could not be used (a judge's invalid
verdict) as an attempt of its request (proactflow/providers/attempts.py); a failed call, which
brought no reply, is never written, so it is retried on the next run. diskcache is SQLite underneath: safe for several processes sharing one store.

Leases keep two runs on one store from paying twice for the same call: a process claims a request
before calling, looks in the cache once more (the previous holder may have just finished), and
only then calls; another process that needs the same request waits for the result instead. The
holder renews its lease while it works; a lease whose holder died on this host is taken over at
once, one of a holder on another host expires within its time to live.

The call layer awaits a `CallStore`: this diskcache (`LocalCallStore`, one host) or PostgreSQL
(`calls_postgres.PostgresCallStore`, `--database`: exact across hosts).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

import diskcache

from ..common.cancellation import undone_if_cancelled
from .call_thread import CallThread

_HOST = socket.gethostname()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class CallCache:
    def __init__(self, directory: Path | str):
        directory = Path(directory)
        self._results = diskcache.Cache(str(directory), size_limit=2**40, eviction_policy="none")
        self._leases = diskcache.Cache(str(directory / "leases"), eviction_policy="none")
        self.thread = CallThread(self._transaction, self._close_connections,
                                 f"proactflow-calls:{directory.name}")
        """Where LocalCallStore runs this cache's operations (call_thread.py)."""

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction on each database, always taken in this order (so two processes
        never wait on each other's second lock). The results commit first: when their commit
        fails, the leases' transaction is rolled back with it, so a group whose callers were
        told it failed leaves no claim behind (a failed commit of the leases after the results
        leaves stored results, which are the first writer's anyway)."""
        with self._leases.transact(), self._results.transact():
            yield

    def get(self, request_key: str) -> dict[str, Any] | None:
        return self._results.get(request_key)

    def __contains__(self, request_key: str) -> bool:
        return request_key in self._results

    def put(self, request_key: str, record: dict[str, Any], *, replace: bool = False
            ) -> dict[str, Any]:
        """Store the record of a finished call and return the record now stored: the first
        writer wins (two runs that both paid keep one answer, and both use it), unless `replace`
        (an explicit refresh)."""
        if replace:
            self._results.set(request_key, record)
            return record
        if self._results.add(request_key, record):
            return record
        return self._results.get(request_key, record)

    def claim(self, request_key: str, ttl: float) -> bool:
        """Take the lease on a request; False while another live holder has it."""
        with self._leases.transact():
            return self._claim_in_transaction(request_key, ttl)

    def _claim_in_transaction(self, request_key: str, ttl: float) -> bool:
        me = (_HOST, os.getpid())
        holder = self._leases.get(request_key)
        if holder is not None:
            host, pid = holder
            if host != _HOST or pid == me[1] or _alive(pid):
                return False
        self._leases.set(request_key, me, expire=ttl)
        return True

    def look_or_claim(self, request_key: str, ttl: float, *, look: bool = True
                      ) -> tuple[dict[str, Any] | None, bool]:
        """The stored record (and no lease), else whether the lease is now this process's."""
        with self._transaction():
            return self.look_or_claim_in_transaction(request_key, ttl, look=look)

    def look_or_claim_in_transaction(self, request_key: str, ttl: float, *, look: bool = True
                                     ) -> tuple[dict[str, Any] | None, bool]:
        """`look_or_claim` for a caller inside `_transaction()` (the cache's thread runs every
        batch that writes in one): no other process can store a result or let a lease go
        between the look and the claim, so one look is enough, where a look after the claim
        cost a statement per call when each was a transaction of its own."""
        if look and (record := self.get(request_key)) is not None:
            return record, False
        return None, self._claim_in_transaction(request_key, ttl)

    def store_and_release(self, request_key: str, record: dict[str, Any], *,
                          replace: bool = False) -> dict[str, Any]:
        """`put`, then give the lease back."""
        try:
            return self.put(request_key, record, replace=replace)
        finally:
            self.release(request_key)

    def renew(self, request_key: str, ttl: float) -> None:
        self._leases.touch(request_key, expire=ttl)

    def release(self, request_key: str) -> None:
        self._leases.delete(request_key)

    def _close_connections(self) -> None:
        self._results.close()
        self._leases.close()

    def close(self) -> None:
        """Finish the queued operations, then close (the connections of the calling thread
        and of the cache's own)."""
        self.thread.stop()
        self._close_connections()


class CallStore(Protocol):
    """The per-call cache and its leases as the call layer uses them. Awaited, so that a store
    on a server never blocks the event loop with a round trip."""

    async def get(self, request_key: str) -> dict[str, Any] | None: ...

    async def get_many(self, request_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The records stored for any of these keys (plans count them before a run)."""
        ...

    async def put(self, request_key: str, record: dict[str, Any], *, replace: bool = False
                  ) -> dict[str, Any]:
        """Store a finished call; the record now stored (the first writer wins, unless
        `replace`)."""
        ...

    async def claim(self, request_key: str, ttl: float) -> bool:
        """Take the lease on a request; False while another holder has it."""
        ...

    async def look_or_claim(self, request_key: str, ttl: float, *, look: bool = True
                            ) -> tuple[dict[str, Any] | None, bool]:
        """The stored record (and no lease), else whether this client now holds the lease,
        having looked once more after claiming; with `look` False, the claim alone."""
        ...

    async def store_and_release(self, request_key: str, record: dict[str, Any], *,
                                replace: bool = False) -> dict[str, Any]:
        """`put`, then `release` the lease."""
        ...

    async def renew(self, request_key: str, ttl: float) -> None: ...

    async def release(self, request_key: str) -> None: ...

    async def close(self) -> None: ...


class LocalCallStore:
    """A CallCache as a CallStore: its operations run on the cache's own thread, in committed
    groups (call_thread.py), so that the event loop never waits on SQLite's locks.

    `on_close` replaces closing the cache (open_call_store shares one cache per directory)."""

    def __init__(self, cache: CallCache, on_close: Callable[[], None] | None = None):
        self.cache = cache
        self._on_close = on_close
        self._closed = False

    async def get(self, request_key: str) -> dict[str, Any] | None:
        return await self.cache.thread.submit(partial(self.cache.get, request_key), writes=False)

    async def get_many(self, request_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        def found() -> dict[str, dict[str, Any]]:
            records = ((key, self.cache.get(key)) for key in request_keys)
            return {key: record for key, record in records if record is not None}
        return await self.cache.thread.submit(found, writes=False)

    async def put(self, request_key: str, record: dict[str, Any], *, replace: bool = False
                  ) -> dict[str, Any]:
        return await self.cache.thread.submit(
            partial(self.cache.put, request_key, record, replace=replace), writes=True)

    async def claim(self, request_key: str, ttl: float) -> bool:
        return await undone_if_cancelled(
            self.cache.thread.submit(partial(self.cache.claim, request_key, ttl), writes=True),
            lambda claimed: self.release(request_key) if claimed else None)

    async def look_or_claim(self, request_key: str, ttl: float, *, look: bool = True
                            ) -> tuple[dict[str, Any] | None, bool]:
        # The claim runs on the cache's thread even when its caller is cancelled meanwhile:
        # a lease it took is given back, not left to expire.
        return await undone_if_cancelled(
            self.cache.thread.submit(partial(self.cache.look_or_claim_in_transaction, request_key,
                                             ttl, look=look), writes=True),
            lambda outcome: self.release(request_key) if outcome[1] else None)

    async def store_and_release(self, request_key: str, record: dict[str, Any], *,
                                replace: bool = False) -> dict[str, Any]:
        return await self.cache.thread.submit(
            partial(self.cache.store_and_release, request_key, record, replace=replace),
            writes=True)

    async def renew(self, request_key: str, ttl: float) -> None:
        await self.cache.thread.submit(partial(self.cache.renew, request_key, ttl), writes=True)

    async def release(self, request_key: str) -> None:
        await self.cache.thread.submit(partial(self.cache.release, request_key), writes=True)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        (self._on_close or self.cache.close)()


_shared: dict[Path, tuple[CallCache, int]] = {}
_shared_lock = threading.Lock()


def _open_shared(directory: Path) -> LocalCallStore:
    """A store on this process's one CallCache of `directory`: every evaluation of a process
    queues on one thread, so their operations commit together."""
    directory = directory.resolve()
    with _shared_lock:
        cache, users = _shared.get(directory) or (CallCache(directory), 0)
        _shared[directory] = (cache, users + 1)

    def let_go() -> None:
        with _shared_lock:
            cache, users = _shared[directory]
            if users > 1:
                _shared[directory] = (cache, users - 1)
                return
            del _shared[directory]
        cache.close()

    return LocalCallStore(cache, on_close=let_go)


def as_call_store(cache: CallStore | CallCache) -> CallStore:
    return LocalCallStore(cache) if isinstance(cache, CallCache) else cache


def open_call_store(directory: Path | str, database: str | None = None) -> CallStore:
    """The per-call cache: in `database` (a PostgreSQL URL) when given, else in `directory`."""
    if database:
        from .calls_postgres import PostgresCallStore

        return PostgresCallStore(database, directory or None)
    return _open_shared(Path(directory))
