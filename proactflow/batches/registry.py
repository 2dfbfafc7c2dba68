"""The store's record of every batch submitted: what makes a batch paid once, whatever happens.

A record is written before the provider is asked to create the batch (its tag and the keys of its
requests, no id yet) and completed with the batch's id right after, then with its state as it is
polled. A process that is about to send a request first looks here: a request in a live batch is
awaited, one in an ended batch is read from that batch's results, and only a request in no batch,
or one its batch never ran, is sent again. A record without an id (the process died between
writing it and recording the id) is resolved by asking the provider for the batch of that tag.

Local stores keep one JSON file per batch beside the per-call cache, written atomically (a
temporary file renamed over the old one); `--database` keeps them in a PostgreSQL table
(registry_postgres.py), so hosts sharing the database see each other's batches.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Protocol

from .protocol import ENDED

SUBMITTING = "submitting"
"""Recorded, not yet known to exist at the provider (no id)."""
NEVER_CREATED = "never_created"
"""Recorded, then found never to have been created (the process died before): its requests are
in no batch."""
CLOSED = frozenset({*ENDED, NEVER_CREATED})
"""States in which a batch will not change: its requests may be sent again if it holds no
result for them."""


@dataclass(frozen=True)
class BatchRecord:
    tag: str
    """Ours, attached to the batch at the provider (its metadata): how a batch is found again
    when the process died before recording its id."""
    provider: str
    endpoint: str | None
    """The effective endpoint, canonical and without credentials."""
    model: str
    keys: tuple[str, ...]
    """The per-call cache keys of its requests (the lines' custom_id)."""
    state: str = SUBMITTING
    batch_id: str = ""
    created: float = field(default_factory=time.time)
    """When the record was written (seconds since the epoch)."""
    submitted: float | None = None
    ended: float | None = None
    done: int = 0
    failed: int = 0
    api_base: str | None = None
    """The role's endpoint as given, credentials masked: with `api_key_env`, what `proactflow
    batches cancel` reaches the batch with."""
    api_key_env: str | None = None
    """The name of the variable holding the key (never the key)."""
    resent: int = 0
    """Lines sent again: an earlier batch holding them ended without running them."""

    @property
    def total(self) -> int:
        return len(self.keys)

    @property
    def live(self) -> bool:
        return self.state not in CLOSED

    def with_(self, **changes: object) -> "BatchRecord":
        return replace(self, **changes)  # type: ignore[arg-type]

    def as_json(self) -> dict[str, object]:
        return {**asdict(self), "keys": list(self.keys)}

    @classmethod
    def from_json(cls, data: dict) -> "BatchRecord":
        """A record as stored; a field a later proactflow added is left out, not refused."""
        known = {name: value for name, value in data.items() if name in _FIELDS}
        return cls(**{**known, "keys": tuple(data["keys"])})


_FIELDS = frozenset(BatchRecord.__dataclass_fields__)


class BatchRegistry(Protocol):
    async def put(self, record: BatchRecord) -> None:
        """Write (or replace) the record of `record.tag`; durable when it returns."""
        ...

    async def records(self) -> list[BatchRecord]:
        """Every record, oldest first."""
        ...

    async def holding(self, key: str) -> BatchRecord | None:
        """The newest batch holding request `key` that was (or may have been) created."""
        ...


class LocalBatchRegistry:
    """One JSON file per batch in a folder of the store (`batches/`)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._read: dict[str, tuple[int, BatchRecord]] = {}
        """Records already parsed, by file name, with the file's mtime then."""
        self._index = KeyIndex()
        self._listed: tuple[int, list[BatchRecord]] | None = None
        """The folder's mtime and its records then: a rename into the folder (every write)
        changes it, so an unchanged folder is not read again (a run looks before each call)."""

    async def put(self, record: BatchRecord) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as out:
                json.dump(record.as_json(), out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.folder / f"{record.tag}.json")
            self._listed = None  # within the folder's mtime granularity: read it again
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    async def records(self) -> list[BatchRecord]:
        return self.read()

    def read(self) -> list[BatchRecord]:
        """Every record, oldest first (for callers outside an event loop)."""
        try:
            stamp = self.folder.stat().st_mtime_ns
        except FileNotFoundError:
            return []
        if self._listed is not None and self._listed[0] == stamp:
            return self._listed[1]
        found = []
        for path in self.folder.glob("*.json"):
            try:
                mtime = path.stat().st_mtime_ns
            except FileNotFoundError:
                continue
            known = self._read.get(path.name)
            if known is None or known[0] != mtime:
                known = (mtime, BatchRecord.from_json(json.loads(path.read_text())))
                self._read[path.name] = known
            found.append(known[1])
        listed = sorted(found, key=lambda record: record.created)
        self._listed = (stamp, listed)
        return listed

    async def holding(self, key: str) -> BatchRecord | None:
        return self._index.holding(self.read(), key)


class KeyIndex:
    """Which batch holds a key, rebuilt only when the records changed (a sweep looks up every
    request it is about to send)."""

    def __init__(self) -> None:
        self._seen: list[BatchRecord] = []
        self._by_key: dict[str, BatchRecord] = {}

    def holding(self, records: list[BatchRecord], key: str) -> BatchRecord | None:
        if records != self._seen:
            self._by_key = {held: record for record in records  # newest last: newest wins
                            if record.state != NEVER_CREATED for held in record.keys}
            self._seen = records
        return self._by_key.get(key)
