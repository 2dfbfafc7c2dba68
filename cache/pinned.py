"""The store as one night read it: some keys pinned to the version that night read.

A `--refresh` (or a sweep's `refresh_on_change`) writes a new version of a key beside the
earlier ones (artifacts.py); readers get the newest. A page of a recorded night (the history's
side-by-side pages) must show what that night read, so it reads through `PinnedStore`, which
answers each pinned (stage, key) with its pinned version and everything else as the store does.
"""

from __future__ import annotations

from typing import Mapping

from .artifact import COMPLETE_METADATA, Artifact, read_metadata
from .artifacts import ArtifactStore


class PinnedStore(ArtifactStore):
    """`store`, with `pins[(stage, key)]` the version `get_by_key` returns for that key (0: the
    incomplete output)."""

    def __init__(self, store: ArtifactStore, pins: Mapping[tuple[str, str], int]):
        self._storage = store._storage
        self.url = store.url
        self.refreshing = frozenset()  # a reader: it writes nothing
        self.pins = dict(pins)

    def get_by_key(self, stage: str, key: str) -> Artifact:
        version = self.pins.get((stage, key))
        if version is None:
            return super().get_by_key(stage, key)
        found = self.stored_key(stage, key)
        entry = found.incomplete if version == 0 else found.versions.get(version)
        if entry is None:
            raise FileNotFoundError(f"version {version} of {stage} artifact {key} is no longer "
                                    f"in {self.url}")
        complete = version > 1 or (version == 1 and read_metadata(self._storage, entry.name).get(
            COMPLETE_METADATA, b"true") == b"true")
        return self._artifact(stage, key, entry.name, version, complete)
