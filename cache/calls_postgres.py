"""The per-call cache and its leases in PostgreSQL (`--database`): exact across hosts.

Results live in one table, keyed by the request; the first writer wins (`INSERT ... ON CONFLICT
DO NOTHING`, then the winner is read), unless a refresh replaces it. A lease is a session-level
advisory lock, keyed by 64 bits of the request key, on the one connection of this process that
holds them all (see proactflow/common/postgres.py): the server frees it the moment that connection
ends, however the process ended, so a lease needs no time to live and renewing costs nothing.

An answer paid for while the database is away for longer than the run waits for it is kept in
this host's store (`pending`, a folder beside the local per-call cache) and written to the
database when the next run on this host connects, before it looks anything up: the next run
pays nothing for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

from ..common.postgres import Database, attach, check_database_url, detach

PENDING_FOLDER = "database-pending"
"""In the local per-call cache's folder: answers paid for that the database did not take."""

_MANY = 1000  # keys per round trip when a plan counts cached calls


def lock_id(request_key: str) -> int:
    """The advisory lock of a request: 64 bits of a hash of its key (a collision only makes
    two different calls wait for each other)."""
    return int.from_bytes(hashlib.sha256(request_key.encode()).digest()[:8], "big", signed=True)


class PostgresCallStore:
    """A CallStore on a PostgreSQL database. Connects on first use, from the event loop that
    uses it; a store used from another loop later (a second asyncio.run) connects again."""

    def __init__(self, url: str, local: Path | str | None = None):
        self.url = check_database_url(url)
        self.pending = Path(local) / PENDING_FOLDER if local else None
        """Where answers paid for wait for the database (None: nowhere, a store of tests)."""
        self._database: Database | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._attaching: asyncio.Lock | None = None

    async def database(self) -> Database:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the connections of a finished loop are gone with it
            self._loop, self._database, self._attaching = loop, None, asyncio.Lock()
        assert self._attaching is not None
        async with self._attaching:
            if self._database is None:
                database = await attach(self.url)
                try:
                    await self._deliver_pending(database)
                except BaseException:
                    await detach(database)
                    raise
                self._database = database
        return self._database

    async def _deliver_pending(self, database: Database) -> None:
        """Answers kept on this host when the database was away: into it (first writer wins),
        then removed here."""
        if self.pending is None or not self.pending.exists():
            return
        import diskcache

        kept = await asyncio.to_thread(diskcache.Cache, str(self.pending))
        try:
            for request_key in await asyncio.to_thread(list, kept):
                record = await asyncio.to_thread(kept.get, request_key)
                if record is not None:
                    await self._insert(database, request_key, record)
                await asyncio.to_thread(kept.delete, request_key)
        finally:
            kept.close()

    def _keep_here(self, request_key: str, record: dict[str, Any]) -> None:
        import diskcache

        if self.pending is None:
            return
        with contextlib.closing(diskcache.Cache(str(self.pending))) as kept:
            kept.set(request_key, record)

    async def get(self, request_key: str) -> dict[str, Any] | None:
        database = await self.database()
        text = await database.fetchval(
            "SELECT record::text FROM proactflow_calls WHERE request_key = $1", request_key,
            idempotent=True)
        return None if text is None else json.loads(text)

    async def get_many(self, request_keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        database = await self.database()
        found: dict[str, dict[str, Any]] = {}
        keys = list(request_keys)
        for start in range(0, len(keys), _MANY):
            rows = await database.fetch(
                "SELECT request_key, record::text FROM proactflow_calls "
                "WHERE request_key = ANY($1::text[])", keys[start:start + _MANY],
                idempotent=True)
            found.update((row[0], json.loads(row[1])) for row in rows)
        return found

    async def put(self, request_key: str, record: dict[str, Any], *, replace: bool = False
                  ) -> dict[str, Any]:
        try:
            database = await self.database()
            if replace:
                await database.fetchval(
                    "INSERT INTO proactflow_calls (request_key, record) VALUES ($1, $2::jsonb) "
                    "ON CONFLICT (request_key) DO UPDATE SET record = EXCLUDED.record, "
                    "stored_at = now()", request_key, json.dumps(record), idempotent=True)
                return record
            inserted = await self._insert(database, request_key, record)
        except Exception:
            # The database stayed away (or refused): the answer paid for is kept here, for
            # the next run to deliver, before the error stops this one.
            await asyncio.to_thread(self._keep_here, request_key, record)
            raise
        if inserted:
            return record
        # A statement of its own: the insert's snapshot may predate the winner's commit.
        stored = await self.get(request_key)
        return record if stored is None else stored

    @staticmethod
    async def _insert(database: Database, request_key: str, record: dict[str, Any]) -> bool:
        """Whether `record` was stored (else another was first). Run again after a lost
        connection, it may find its own first insert: the record stored is then this one."""
        return bool(await database.fetchval(
            "INSERT INTO proactflow_calls (request_key, record) VALUES ($1, $2::jsonb) "
            "ON CONFLICT DO NOTHING RETURNING true", request_key, json.dumps(record),
            idempotent=True))

    async def claim(self, request_key: str, ttl: float) -> bool:
        database = await self.database()
        return await database.try_lock(lock_id(request_key))

    async def look_or_claim(self, request_key: str, ttl: float, *, look: bool = True
                            ) -> tuple[dict[str, Any] | None, bool]:
        if look and (record := await self.get(request_key)) is not None:
            return record, False
        if not await self.claim(request_key, ttl):
            return None, False
        try:
            record = await self.get(request_key) if look else None
        except BaseException:  # cancelled or failed: nobody would know of the lease
            await self.release(request_key)
            raise
        if record is not None:
            await self.release(request_key)  # stored by the previous holder meanwhile
            return record, False
        return None, True

    async def store_and_release(self, request_key: str, record: dict[str, Any], *,
                                replace: bool = False) -> dict[str, Any]:
        # Shielded: a paid answer is stored even when its caller is cancelled meanwhile (a pool
        # aborted by a sibling's error, Ctrl-C), so the next run does not pay again; the lease
        # is given back once the answer is in, never before.
        stored = asyncio.ensure_future(self.put(request_key, record, replace=replace))
        try:
            return await asyncio.shield(stored)
        except asyncio.CancelledError:
            await asyncio.wait([stored])
            if not stored.cancelled():
                stored.exception()  # kept on this host if it failed: the caller has gone
            raise
        finally:
            await self.release(request_key)

    async def renew(self, request_key: str, ttl: float) -> None:
        database = await self.database()
        await database.keep_lock(lock_id(request_key))

    async def release(self, request_key: str) -> None:
        # No wait before the unlock, which is shielded: a cancelled call gives its lease back.
        if self._database is not None and self._loop is asyncio.get_running_loop():
            await self._database.unlock(lock_id(request_key))

    async def close(self) -> None:
        if self._database is not None and self._loop is asyncio.get_running_loop():
            await detach(self._database)
        self._database = None
