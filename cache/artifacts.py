"""Content-addressed Parquet artifacts, run records and cached inputs: the store. `ArtifactStore`
is the only code that touches the store's files, wherever the store is (storage.py reads and
writes them; artifact.py is one artifact and its Parquet footer).

A stage output is named by `key`, the sha256 of the canonical JSON of the stage name, its version,
its input artifact keys and every setting that changes its output. The bytes of a Parquet file
vary with library versions, so the name comes from what went in, never from the file.

Layout under the store root (a local folder or `s3://bucket/prefix`):

    artifacts/<stage>/<key>.parquet          version 1: the first complete output, written once
    artifacts/<stage>/<key>/incomplete.parquet   an output holding error rows, replaced by
                                                 each new attempt until one is complete
    artifacts/<stage>/<key>/v<n>.parquet     version n >= 2: what a --refresh asked again,
                                             written once each
    artifacts/<stage>/<key>/used             object storage only: when a run last reused it
    runs/<name>.json                         run records
    inputs/...                               cached upstream inputs (the judge prompt)

Complete versions are created, never overwritten, so many writers racing for one key leave
exactly one file and all of them read its bytes; a reader sees nothing or a whole file. The
current output of a key is its newest complete version, unless the incomplete slot was written
after it (a refresh whose calls partly failed: the next run recomputes it, as before).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from ..common.errors import UserError
from .artifact import (AFTER_METADATA, COMPLETE_METADATA, KEY_METADATA, Artifact, ArtifactSpec,
                       StoredKey, UnreadableArtifact, encode, quarantine, read_metadata,
                       storage_for, write_atomic, write_parquet_atomic)
from .keys import content_key
from .storage import Entry

__all__ = ["Artifact", "ArtifactSpec", "ArtifactStore", "StoredKey", "storage_for",
           "write_atomic", "write_parquet_atomic"]

_VERSION_FILE = re.compile(r"v(\d+)\.parquet")
_STATE_ENV = "PROACTFLOW_STATE_DIR"


def _temporary(name: str) -> bool:
    """A write killed half-way (local stores write beside the target, then link or rename)."""
    base = name.rsplit("/", 1)[-1]
    return base.startswith(".") and base.endswith(".tmp")


class ArtifactStore:
    """Parquet artifacts, run records and cached inputs under one root: a folder or a URL.

    `refreshing` names the stages this handle writes anew even where a complete output exists
    (a --refresh run, and the stages computed from the one refreshed); any other writer that
    finds a complete output already stored keeps that one and returns it.
    """

    def __init__(self, root: Path | str, *, refreshing: Iterable[str] = ()):
        self._storage = storage_for(root)
        self.url = self._storage.url
        self.refreshing = frozenset(refreshing)

    @property
    def is_local(self) -> bool:
        return self._storage.is_local

    @property
    def root(self) -> Path:
        """The folder of a local store. Callers that still build paths need one."""
        if self._storage.local_root is None:
            raise UserError(f"store {self.url}: this command needs a store in a local folder "
                            "(it does not support object storage yet)")
        return self._storage.local_root

    def local_dir(self, name: str) -> Path:
        """A local folder for what cannot live on object storage (the SQLite call cache and
        rate-limit budget): the store's own subfolder, or, for a remote store, one per store
        under $PROACTFLOW_STATE_DIR (default ~/.cache/proactflow), shared by this machine's
        runs only."""
        if self._storage.local_root is not None:
            return self._storage.local_root / name
        base = Path(os.environ.get(_STATE_ENV) or Path.home() / ".cache" / "proactflow")
        tag = re.sub(r"[^A-Za-z0-9._-]+", "_", self.url.split("://", 1)[1]).strip("_")
        return base.expanduser() / f"{tag[:80]}-{content_key(self.url)[:8]}" / name

    # Artifacts.

    @staticmethod
    def _first(stage: str, key: str) -> str:
        return f"artifacts/{stage}/{key}.parquet"

    def path_for(self, stage: str, key: str) -> Path:
        """The file of version 1 in a local store (for callers not yet on `get_by_key`)."""
        return self.root / self._first(stage, key)

    def stored_key(self, stage: str, key: str) -> StoredKey:
        """Every file of one key: locally a stat and a look into its folder; on object storage
        one listing of the names that start with the key."""
        found = StoredKey(stage, key)
        if self._storage.is_local:
            first = self._storage.info(self._first(stage, key))
            entries = [first] if first is not None else []
            entries += self._storage.files(f"artifacts/{stage}/{key}")
        else:
            entries = self._storage.files(f"artifacts/{stage}", starting=key)
        for entry in entries:
            if entry.name == self._first(stage, key):
                found.versions[1] = entry
            elif entry.name.startswith(f"artifacts/{stage}/{key}/"):
                self._file_of(found, entry)
        return found

    @staticmethod
    def _file_of(found: StoredKey, entry: Entry) -> None:
        base = entry.name.rsplit("/", 1)[-1]
        version = _VERSION_FILE.fullmatch(base)
        if version and int(version.group(1)) >= 2:
            found.versions[int(version.group(1))] = entry
        elif base == "incomplete.parquet":
            found.incomplete = entry
        elif base == "used":
            found.marker = entry

    def current(self, found: StoredKey) -> Artifact | None:
        """The output a reader gets for a key: its newest complete version, or the incomplete
        one when that was written after it (or nothing else exists). A file of it that cannot
        be read is moved aside (artifact.quarantine) and the key read without it."""
        while True:
            try:
                return self._current(found)
            except UnreadableArtifact as bad:
                quarantine(self._storage, bad.name, bad.why)
                found.versions = {n: e for n, e in found.versions.items() if e.name != bad.name}
                if found.incomplete is not None and found.incomplete.name == bad.name:
                    found.incomplete = None

    def _current(self, found: StoredKey) -> Artifact | None:
        latest = max(found.versions, default=0)
        if found.incomplete is not None and (
                not latest or int(read_metadata(self._storage, found.incomplete.name)
                                  .get(AFTER_METADATA, b"0")) >= latest):
            return self._artifact(found.stage, found.key, found.incomplete.name, 0, False)
        if not latest:
            return None
        name = found.versions[latest].name
        # Only version 1 can be incomplete: a store written before complete outputs were
        # kept apart held both kinds there.
        # The footer is read for every version: a file that is not whole Parquet shows here.
        complete = read_metadata(self._storage, name).get(
            COMPLETE_METADATA, b"true") == b"true" or latest > 1
        return self._artifact(found.stage, found.key, name, latest, complete)

    def _artifact(self, stage: str, key: str, name: str, version: int, complete: bool
                  ) -> Artifact:
        return Artifact(stage, key, self.url, name, complete, version)

    def get(self, spec: ArtifactSpec) -> Artifact | None:
        """The stored artifact for `spec`, or None when it was never written. A hit is marked as
        just used, so that `proactflow gc` keeps what a run in progress reuses."""
        found = self.current(self.stored_key(spec.stage, spec.key))
        if found is not None:
            self._mark_used(found)
        return found

    def _mark_used(self, artifact: Artifact) -> None:
        if self._storage.is_local:
            self._storage.touch(artifact.name)
        else:  # an object's time cannot change without rewriting it: a marker beside it
            self._storage.replace(f"artifacts/{artifact.stage}/{artifact.key}/used", b"")

    def get_by_key(self, stage: str, key: str) -> Artifact:
        """A stored artifact named by its key (for one whose spec is not at hand)."""
        found = self.current(self.stored_key(stage, key))
        if found is None:
            raise FileNotFoundError(f"no {stage} artifact {key} in {self.url}")
        return found

    def exists(self, stage: str, key: str) -> bool:
        found = self.stored_key(stage, key)
        return bool(found.versions or found.incomplete)

    def material(self, stage: str, key: str) -> dict[str, Any]:
        """The key material of a stored artifact (FileNotFoundError when there is none)."""
        return self.get_by_key(stage, key).material()

    def key_material(self, location: Path | str) -> dict[str, Any]:
        """The key material of the artifact file at `location` (a path in a local store)."""
        return json.loads((pq.read_schema(location).metadata or {}).get(KEY_METADATA, b"{}"))

    def put(self, spec: ArtifactSpec, table: pa.Table, *, complete: bool = True) -> Artifact:
        """Store a stage output. `complete=False` marks one holding failures to retry later.

        Returns what is stored now: when another writer stored a complete output of this key
        first, that one (unless this handle refreshes the stage), so racing runs all go on with
        the same bytes."""
        found = self.stored_key(spec.stage, spec.key)
        current = self.current(found)
        if spec.stage not in self.refreshing and current is not None and current.complete:
            return current
        latest = max(found.versions, default=0)
        if not complete:
            name = f"artifacts/{spec.stage}/{spec.key}/incomplete.parquet"
            self._storage.replace(name, encode(spec, table, False, latest))
            return self._artifact(spec.stage, spec.key, name, 0, False)
        data = encode(spec, table, True, None)
        version = latest + 1
        while True:
            name = self._first(spec.stage, spec.key) if version == 1 else \
                f"artifacts/{spec.stage}/{spec.key}/v{version}.parquet"
            if self._storage.create(name, data):
                return self._artifact(spec.stage, spec.key, name, version, True)
            winner = self.current(self.stored_key(spec.stage, spec.key))
            if winner is not None and winner.complete and winner.version >= version:
                return winner  # another writer created this version first: theirs is kept
            version += 1  # an incomplete version 1 of an older store: the next one

    def inventory(self, stage: str | None = None) -> tuple[list[StoredKey], list[Entry]]:
        """Every artifact key of the store (or of one stage) with its files (one listing, no
        file read), and the temporary files of writes killed half-way."""
        keys: dict[tuple[str, str], StoredKey] = {}
        leftovers = []
        for entry in self._storage.files(f"artifacts/{stage}" if stage else "artifacts"):
            parts = entry.name.split("/")
            if _temporary(entry.name):
                leftovers.append(entry)
            elif len(parts) == 3 and parts[2].endswith(".parquet"):
                stage, key = parts[1], parts[2].removesuffix(".parquet")
                keys.setdefault((stage, key), StoredKey(stage, key)).versions[1] = entry
            elif len(parts) == 4:
                found = keys.setdefault((parts[1], parts[2]), StoredKey(parts[1], parts[2]))
                self._file_of(found, entry)
        return [found for _, found in sorted(keys.items())], leftovers

    def keys(self, stage: str) -> dict[str, float]:
        """Key -> when it was last written or reused, of every stored artifact of a stage."""
        return {k.key: k.modified for k in self.inventory(stage)[0]
                if k.versions or k.incomplete}

    def remove(self, entries: Iterable[Entry]) -> None:
        """Remove files listed by `inventory` (gc)."""
        for entry in entries:
            self._storage.remove(entry.name)

    # Run records and cached inputs.

    def write_json(self, relative: str, value: Any, *, compact: bool = False) -> str:
        """Write a JSON file (a run record: `runs/<name>.json`); returns where it is.
        `compact`: on one line, for a file holding long lists (a history night's samples)."""
        data = (json.dumps(value, indent=None if compact else 2, ensure_ascii=False,
                           separators=(",", ":") if compact else None) + "\n").encode()
        self._storage.replace(relative, data)
        return self._storage.location(relative)

    def records(self, run_id: str = "") -> list[tuple[Entry, bytes]]:
        """Every run record file with its bytes, by name; only those of `run_id` when given
        (its first 8 characters end the name: only they are read)."""
        entries = [e for e in self._storage.files("runs")
                   if e.name.endswith(f"{'-' + run_id[:8] if run_id else ''}.json")
                   and e.name.count("/") == 1]
        return [(entry, self._storage.read(entry.name)) for entry in entries]

    def json_files(self, folder: str, *, last_first: bool = False
                   ) -> Iterator[tuple[Entry, bytes]]:
        """Every `.json` file under `folder` (any depth) with its bytes, by name (`last_first`:
        in reverse), each read when the caller reaches it: a sweep reads only the newest few
        nights of its history (`history/<series>/<night>.json`)."""
        entries = sorted((e for e in self._storage.files(folder) if e.name.endswith(".json")),
                         key=lambda entry: entry.name, reverse=last_first)
        return ((entry, self._storage.read(entry.name)) for entry in entries)

    def json_names(self, folder: str) -> list[str]:
        """The names of the `.json` files under `folder`, sorted; none is read."""
        return sorted(e.name for e in self._storage.files(folder) if e.name.endswith(".json"))

    def remove_record(self, name: str) -> None:
        """Remove the run record `runs/<name>.json`."""
        self._storage.remove(f"runs/{name}.json")

    def location(self, relative: str) -> str:
        return self._storage.location(relative)

    def read_input(self, relative: str) -> bytes | None:
        """A cached input (`inputs/<relative>`), or None when it is not cached."""
        try:
            return self._storage.read(f"inputs/{relative}")
        except FileNotFoundError:
            return None

    def write_input(self, relative: str, data: bytes) -> None:
        self._storage.replace(f"inputs/{relative}", data)

