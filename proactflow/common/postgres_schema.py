"""The proactflow tables in a PostgreSQL database (postgres.py): made on first use, with the
layout's version recorded so that a later layout can migrate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import UserError

if TYPE_CHECKING:
    import asyncpg

SCHEMA_VERSION = 3
PRESENCE_SPACE = 0x70726573
"""The first key of the two-key advisory lock (PRESENCE_SPACE, holder) that a process holds on
its leases' connection while it is connected: how others see that a lease's holder is there."""
_SCHEMA_LOCK = 0x70726f6163740000  # "proact": serialises table creation across processes
_SCHEMA = """
CREATE TABLE IF NOT EXISTS proactflow_schema (
    component text PRIMARY KEY,
    version integer NOT NULL);
CREATE TABLE IF NOT EXISTS proactflow_calls (
    request_key text PRIMARY KEY,
    record jsonb NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS proactflow_pacer (
    bucket text PRIMARY KEY,
    next_at double precision NOT NULL);
"""
# Version 2 (issue #31): who holds each lease, so that a lease whose holder lost its connection
# (and with it the advisory lock) is not taken by another process while the holder reconnects;
# and the operations applied once (a pacer's booking run again after a lost connection).
_SCHEMA_2 = f"""
CREATE TABLE IF NOT EXISTS proactflow_leases (
    lock_id bigint PRIMARY KEY,
    holder integer NOT NULL);
CREATE TABLE IF NOT EXISTS proactflow_applied (
    operation uuid PRIMARY KEY,
    result double precision,
    applied_at timestamptz NOT NULL DEFAULT now());
CREATE OR REPLACE FUNCTION proactflow_claim(key bigint, me integer, takeover integer)
RETURNS integer LANGUAGE plpgsql AS $$
-- 0: taken. -1: held, or its holder is connected (re-taking it): wait. Else the holder whose
-- lease this was, not connected now: the caller takes it over (takeover) once that has lasted.
DECLARE previous integer;
BEGIN
    IF NOT pg_try_advisory_lock(key) THEN
        RETURN -1;
    END IF;
    SELECT holder INTO previous FROM proactflow_leases WHERE lock_id = key;
    IF previous IS NOT NULL AND previous <> me AND previous IS DISTINCT FROM takeover THEN
        PERFORM pg_advisory_unlock(key);
        IF EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
                   AND objsubid = 2 AND classid = {PRESENCE_SPACE}::oid
                   AND objid = previous::oid
                   AND database = (SELECT oid FROM pg_database
                                   WHERE datname = current_database())) THEN
            RETURN -1;
        END IF;
        RETURN previous;
    END IF;
    INSERT INTO proactflow_leases VALUES (key, me)
        ON CONFLICT (lock_id) DO UPDATE SET holder = EXCLUDED.holder;
    RETURN 0;
END $$;
CREATE OR REPLACE FUNCTION proactflow_release(key bigint, me integer, unlock boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM proactflow_leases WHERE lock_id = key AND holder = me;
    IF unlock THEN
        PERFORM pg_advisory_unlock(key);
    END IF;
END $$;
CREATE OR REPLACE FUNCTION proactflow_rejoin(me integer, keys bigint[])
RETURNS bigint[] LANGUAGE plpgsql AS $$
-- A new leases' connection: present again, its leases taken back, the others' records gone.
DECLARE kept bigint[] := '{{}}'; key bigint;
BEGIN
    PERFORM pg_try_advisory_lock({PRESENCE_SPACE}, me);
    DELETE FROM proactflow_leases WHERE holder = me AND NOT (lock_id = ANY(keys));
    FOREACH key IN ARRAY keys LOOP
        IF proactflow_claim(key, me, NULL) = 0 THEN
            kept := kept || key;
        END IF;
    END LOOP;
    RETURN kept;
END $$;
"""

# Version 3 (issue #29): the batches submitted with --batch, a record each (registry.py), and
# which batches hold each request.
_SCHEMA_3 = """
CREATE TABLE IF NOT EXISTS proactflow_batches (
    tag text PRIMARY KEY,
    record jsonb NOT NULL,
    created double precision NOT NULL);
CREATE TABLE IF NOT EXISTS proactflow_batch_keys (
    request_key text NOT NULL,
    tag text NOT NULL REFERENCES proactflow_batches (tag) ON DELETE CASCADE,
    PRIMARY KEY (request_key, tag));
"""


async def ensure_schema(connection: asyncpg.Connection) -> None:
    """Tables on first use; the version recorded, so that a later layout can migrate. Only
    creating needs the right to create tables: a database made by its admin is only read."""
    import asyncpg

    try:
        version = await connection.fetchval(
            "SELECT version FROM proactflow_schema WHERE component = 'proactflow'")
    except asyncpg.UndefinedTableError:
        version = None
    if version is None or version < SCHEMA_VERSION:
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK)
            await connection.execute(_SCHEMA)
            await connection.execute(_SCHEMA_2)
            await connection.execute(_SCHEMA_3)
            await connection.execute(
                "INSERT INTO proactflow_schema VALUES ('proactflow', $1) ON CONFLICT "
                "(component) DO UPDATE SET version = GREATEST(proactflow_schema.version, "
                "EXCLUDED.version)", SCHEMA_VERSION)
            version = await connection.fetchval(
                "SELECT version FROM proactflow_schema WHERE component = 'proactflow'")
    if version > SCHEMA_VERSION:
        raise UserError(f"the database's proactflow tables are at schema version {version}, "
                        f"newer than this proactflow's {SCHEMA_VERSION}: upgrade proactflow")
