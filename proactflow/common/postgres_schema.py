"""The proactflow tables in a PostgreSQL database (postgres.py): made on first use, with the
layout's version recorded so that a later layout can migrate."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import UserError

if TYPE_CHECKING:
    import asyncpg

SCHEMA_VERSION = 1
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


async def ensure_schema(connection: asyncpg.Connection) -> None:
    """Tables on first use; the version recorded, so that a later layout can migrate. Only
    creating needs the right to create tables: a database made by its admin is only read."""
    import asyncpg

    try:
        version = await connection.fetchval(
            "SELECT version FROM proactflow_schema WHERE component = 'proactflow'")
    except asyncpg.UndefinedTableError:
        version = None
    if version is None:
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK)
            await connection.execute(_SCHEMA)
            await connection.execute(
                "INSERT INTO proactflow_schema VALUES ('proactflow', $1) "
                "ON CONFLICT DO NOTHING", SCHEMA_VERSION)
            version = await connection.fetchval(
                "SELECT version FROM proactflow_schema WHERE component = 'proactflow'")
    if version > SCHEMA_VERSION:
        raise UserError(f"the database's proactflow tables are at schema version {version}, "
                        f"newer than this proactflow's {SCHEMA_VERSION}: upgrade proactflow")
