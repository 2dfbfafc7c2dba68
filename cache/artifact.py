"""One stored artifact: what identifies it (`ArtifactSpec`), the handle readers get
(`Artifact`), what a listing knows of a key's files (`StoredKey`), and the Parquet footer that
records its key material and completeness. artifacts.py decides where each version goes.
"""

from __future__ import annotations

import io
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from .keys import canonical_json, content_key
from .storage import Entry, Storage, write_atomic

KEY_METADATA = b"proactflow.key_material"
COMPLETE_METADATA = b"proactflow.complete"
AFTER_METADATA = b"proactflow.after_version"
"""In an incomplete output: the newest complete version when it was written."""

QUARANTINE = "quarantine"
"""Where an artifact file that cannot be read is moved aside, under the store root:
`quarantine/<when>/<its name>` (kept for a person to look at; gc never reads it)."""

log = logging.getLogger("proactflow.store")

_storages: dict[tuple[int, str], Storage] = {}
_storages_lock = threading.Lock()


def storage_for(location: str | Path) -> Storage:
    """One Storage per store and process: the bucket is checked once, and a forked process
    never reuses its parent's connections."""
    text = str(location)
    with _storages_lock:
        found = _storages.get((os.getpid(), text))
        if found is None:
            found = _storages[(os.getpid(), text)] = Storage(text)
        return found


@dataclass(frozen=True)
class ArtifactSpec:
    """What identifies one stage output."""

    stage: str
    version: int
    inputs: dict[str, str]
    settings: dict[str, Any]

    def material(self) -> dict[str, Any]:
        return {"stage": self.stage, "version": self.version, "inputs": self.inputs,
                "settings": self.settings}

    @property
    def key(self) -> str:
        return content_key(self.material())


@dataclass(frozen=True)
class Artifact:
    """A stored stage output: its key, which file holds it and whether it is final. Plain
    strings only, so it travels between Prefect tasks and processes."""

    stage: str
    key: str
    store: str
    """The store it is in, as given (a folder or a URL)."""
    name: str
    """Its file, relative to the store root."""
    complete: bool
    version: int = 1
    """1 for the first complete output, n >= 2 for a refresh, 0 for an incomplete one."""

    @property
    def location(self) -> str:
        return storage_for(self.store).location(self.name)

    @property
    def path(self) -> Path:
        """The file of an artifact in a local store."""
        storage = storage_for(self.store)
        if storage.local_root is None:
            raise ValueError(f"{self.location} is on object storage: it has no local path")
        return storage.local_root / self.name

    def frame(self, columns: list[str] | None = None) -> pl.DataFrame:
        storage = storage_for(self.store)
        if storage.local_root is not None:
            return pl.read_parquet(storage.local_root / self.name, columns=columns)
        with storage.errors(), storage.open_input(self.name) as handle:
            return pl.read_parquet(handle, columns=columns)

    def rows_if_stored(self) -> pl.DataFrame | None:
        """Its rows, or None when it is gone (`proactflow gc` removed it after a run chose to
        reuse it) or cannot be read (moved aside): the run computes it again."""
        try:
            return self.frame()
        except FileNotFoundError:
            return None
        except pa.ArrowInvalid as exc:
            quarantine(storage_for(self.store), self.name, exc)
            return None

    def still_stored(self) -> bool:
        """Whether its file is still there (its footer read, not its rows)."""
        try:
            self.material()
        except FileNotFoundError:
            return False
        return True

    def material(self) -> dict[str, Any]:
        """The key material it was stored with (stage, version, input keys, settings)."""
        return json.loads(read_metadata(storage_for(self.store), self.name)
                          .get(KEY_METADATA, b"{}"))


@lru_cache(maxsize=2)
def shared_samples(artifact: Artifact) -> pl.DataFrame:
    """A samples artifact's rows, read once per process: the evaluations of a sweep share one
    corpus, so one copy of its largest table (each sample with its context, ~18 MB for the
    largest corpus so far) serves them all instead of one per stage and evaluation. A stored
    artifact never changes, and polars frames are immutable."""
    return artifact.frame()


@dataclass
class StoredKey:
    """Every file of one artifact key, as listed (no file read)."""

    stage: str
    key: str
    versions: dict[int, Entry] = field(default_factory=dict)
    incomplete: Entry | None = None
    marker: Entry | None = None

    @property
    def files(self) -> list[Entry]:
        return [*self.versions.values(), *([self.incomplete] if self.incomplete else []),
                *([self.marker] if self.marker else [])]

    @property
    def modified(self) -> float:
        """When it was last written or reused."""
        return max(entry.modified for entry in self.files)


class UnreadableArtifact(ValueError):
    """An artifact file whose Parquet cannot be read (truncated, overwritten): `name`."""

    def __init__(self, name: str, why: BaseException):
        super().__init__(f"{name}: {why}")
        self.name = name
        self.why = why


def read_metadata(storage: Storage, name: str) -> dict[bytes, bytes]:
    """Its footer's metadata; UnreadableArtifact when the file is not whole Parquet."""
    try:
        if storage.local_root is not None:
            return pq.read_schema(storage.local_root / name).metadata or {}
        with storage.errors(), storage.open_input(name) as handle:
            return pq.read_schema(handle).metadata or {}
    except pa.ArrowInvalid as exc:
        raise UnreadableArtifact(name, exc) from None


def quarantine(storage: Storage, name: str, why: BaseException) -> None:
    """Move an unreadable artifact file aside, with one warning line naming it: its key is then
    absent, so a run builds the stage again (from the per-call cache: no call is paid again)
    and readers skip it."""
    target = f"{QUARANTINE}/{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}/{name}"
    if storage.move(name, target):
        reason = str(why).split(". ")[0].rstrip(".")
        log.warning("%s cannot be read (%s): moved aside to %s; a run builds it again",
                    storage.location(name), reason, storage.location(target))


def encode(spec: ArtifactSpec, table: pa.Table, complete: bool, after: int | None) -> bytes:
    metadata = dict(table.schema.metadata or {})
    metadata[KEY_METADATA] = canonical_json(spec.material()).encode("utf-8")
    metadata[COMPLETE_METADATA] = b"true" if complete else b"false"
    if after is not None:
        metadata[AFTER_METADATA] = str(after).encode()
    buffer = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(metadata), buffer, compression="zstd")
    return buffer.getvalue().to_pybytes()


def write_parquet_atomic(path: Path, frame: pl.DataFrame) -> None:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    write_atomic(path, buffer.getvalue())
