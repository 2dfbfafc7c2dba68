"""Content-addressed Parquet artifacts: one file per (stage, version, inputs, settings).

A stage output lives at `<root>/artifacts/<stage>/<key>.parquet`, where `key` is the sha256 of
the canonical JSON of the stage name, its version, its input artifact keys and every setting that
changes its output. The bytes of a Parquet file vary with library versions, so the name comes from
what went in, never from the file. Writes go to a temporary file in the same folder and are
renamed into place, so a reader sees either nothing or a whole file, even after `kill -9`.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from .keys import canonical_json, content_key

_KEY_METADATA = b"proactflow.key_material"
_COMPLETE_METADATA = b"proactflow.complete"


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
    """A stored stage output: its key, where it is and whether it is final."""

    stage: str
    key: str
    path: Path
    complete: bool

    def frame(self) -> pl.DataFrame:
        return pl.read_parquet(self.path)


def write_atomic(path: Path, data: bytes) -> None:
    """Write bytes so that `path` holds either the old content or all of the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_parquet_atomic(path: Path, frame: pl.DataFrame) -> None:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    write_atomic(path, buffer.getvalue())


class ArtifactStore:
    """Parquet artifacts, judge prompts and run records under one root folder."""

    def __init__(self, root: Path | str):
        self.root = Path(root).expanduser()

    def path_for(self, stage: str, key: str) -> Path:
        return self.root / "artifacts" / stage / f"{key}.parquet"

    def get(self, spec: ArtifactSpec) -> Artifact | None:
        """The stored artifact for `spec`, or None when it was never written. A hit is marked as
        just used (its file time), so that `proactflow gc` keeps what a run in progress reuses."""
        try:
            artifact = self.get_by_key(spec.stage, spec.key)
        except FileNotFoundError:
            return None
        try:
            os.utime(artifact.path)
        except OSError:
            pass  # a read-only store still serves reads
        return artifact

    def get_by_key(self, stage: str, key: str) -> Artifact:
        """A stored artifact named by its key (for one whose spec is not at hand)."""
        path = self.path_for(stage, key)
        if not path.exists():
            raise FileNotFoundError(f"no {stage} artifact {key} in {self.root}")
        metadata = pq.read_schema(path).metadata or {}
        return Artifact(stage, key, path, metadata.get(_COMPLETE_METADATA, b"true") == b"true")

    def put(self, spec: ArtifactSpec, table: pa.Table, *, complete: bool = True) -> Artifact:
        """Store a stage output. `complete=False` marks one holding failures to retry later."""
        metadata = dict(table.schema.metadata or {})
        metadata[_KEY_METADATA] = canonical_json(spec.material()).encode("utf-8")
        metadata[_COMPLETE_METADATA] = b"true" if complete else b"false"
        table = table.replace_schema_metadata(metadata)
        buffer = pa.BufferOutputStream()
        pq.write_table(table, buffer, compression="zstd")
        path = self.path_for(spec.stage, spec.key)
        write_atomic(path, buffer.getvalue().to_pybytes())
        return Artifact(spec.stage, spec.key, path, complete)

    def key_material(self, path: Path) -> dict[str, Any]:
        metadata = pq.read_schema(path).metadata or {}
        return json.loads(metadata.get(_KEY_METADATA, b"{}"))

    def write_json(self, relative: str, value: Any) -> Path:
        path = self.root / relative
        write_atomic(path, (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode())
        return path
