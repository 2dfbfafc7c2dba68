"""Per-call response cache: every successful LLM call, keyed by the exact request.

An interrupted stage resumes from here without repeating a finished call. Only successes are
stored; a failed call or a judge reply that did not validate is never written, so it is retried on
the next run. diskcache is SQLite underneath: safe for several processes sharing one store.

Leases keep two runs on one store from paying twice for the same call: a process claims a request
before calling, looks in the cache once more (the previous holder may have just finished), and
only then calls; another process that needs the same request waits for the result instead. The
holder renews its lease while it works; a lease whose holder died on this host is taken over at
once, one of a holder on another host expires within its time to live.

The call layer awaits a `CallStore`: this diskcache (`LocalCallStore`, one host) or PostgreSQL
(`calls_postgres.PostgresCallStore`, `--database`: exact across hosts).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Protocol, Sequence

import diskcache

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
        me = (_HOST, os.getpid())
        with self._leases.transact():
            holder = self._leases.get(request_key)
            if holder is not None:
                host, pid = holder
                if host != _HOST or pid == me[1] or _alive(pid):
                    return False
            self._leases.set(request_key, me, expire=ttl)
            return True

    def renew(self, request_key: str, ttl: float) -> None:
        self._leases.touch(request_key, expire=ttl)

    def release(self, request_key: str) -> None:
        self._leases.delete(request_key)

    def close(self) -> None:
        self._results.close()
        self._leases.close()


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

    async def renew(self, request_key: str, ttl: float) -> None: ...

    async def release(self, request_key: str) -> None: ...

    async def close(self) -> None: ...


class LocalCallStore:
    """A CallCache as a CallStore. Its operations are local SQLite transactions well under a
    millisecond: run in place, they cost less than a hop to a thread would."""

    def __init__(self, cache: CallCache):
        self.cache = cache

    async def get(self, request_key: str) -> dict[str, Any] | None:
        return self.cache.get(request_key)

    async def get_many(self, request_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        found = ((key, self.cache.get(key)) for key in request_keys)
        return {key: record for key, record in found if record is not None}

    async def put(self, request_key: str, record: dict[str, Any], *, replace: bool = False
                  ) -> dict[str, Any]:
        return self.cache.put(request_key, record, replace=replace)

    async def claim(self, request_key: str, ttl: float) -> bool:
        return self.cache.claim(request_key, ttl)

    async def renew(self, request_key: str, ttl: float) -> None:
        self.cache.renew(request_key, ttl)

    async def release(self, request_key: str) -> None:
        self.cache.release(request_key)

    async def close(self) -> None:
        self.cache.close()


def as_call_store(cache: CallStore | CallCache) -> CallStore:
    return LocalCallStore(cache) if isinstance(cache, CallCache) else cache


def open_call_store(directory: Path | str, database: str | None = None) -> CallStore:
    """The per-call cache: in `database` (a PostgreSQL URL) when given, else in `directory`."""
    if database:
        from .calls_postgres import PostgresCallStore

        return PostgresCallStore(database)
    return LocalCallStore(CallCache(directory))
