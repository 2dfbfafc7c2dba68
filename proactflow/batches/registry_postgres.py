"""The batch registry in PostgreSQL (`--database`): every host sharing the database sees every
batch, so a run resumed on another host waits for the batches of the one that died."""

from __future__ import annotations

import json

from ..common.postgres import attach, detach
from .registry import NEVER_CREATED, SUBMITTING, BatchRecord


class PostgresBatchRegistry:
    def __init__(self, url: str):
        self.url = url

    async def put(self, record: BatchRecord) -> None:
        database = await attach(self.url)
        try:
            async with database.pool.acquire() as connection, connection.transaction():
                await connection.execute(
                    "INSERT INTO proactflow_batches VALUES ($1, $2::jsonb, $3) ON CONFLICT (tag) "
                    "DO UPDATE SET record = EXCLUDED.record", record.tag,
                    json.dumps(record.as_json()), record.created)
                if record.state == SUBMITTING:  # its first writing: the keys never change
                    await connection.executemany(
                        "INSERT INTO proactflow_batch_keys VALUES ($1, $2) "
                        "ON CONFLICT DO NOTHING", [(key, record.tag) for key in record.keys])
        finally:
            await detach(database)

    async def records(self) -> list[BatchRecord]:
        database = await attach(self.url)
        try:
            rows = await database.fetch(
                "SELECT record FROM proactflow_batches ORDER BY created", idempotent=True)
        finally:
            await detach(database)
        return [BatchRecord.from_json(json.loads(row["record"])) for row in rows]

    async def holding(self, key: str) -> BatchRecord | None:
        database = await attach(self.url)
        try:
            found = await database.fetchval(
                "SELECT b.record FROM proactflow_batch_keys k JOIN proactflow_batches b "
                "USING (tag) WHERE k.request_key = $1 AND b.record->>'state' <> $2 "
                "ORDER BY b.created DESC LIMIT 1", key, NEVER_CREATED, idempotent=True)
        finally:
            await detach(database)
        return BatchRecord.from_json(json.loads(found)) if found is not None else None
