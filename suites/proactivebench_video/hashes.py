"""The videos' sha256, remembered per file version so that a run does not read every video of
the corpus again (tens of GB for the whole benchmark) only to find the hashes it knew.

A file version is its resolved path, size and modification time in nanoseconds, as `make` and
rsync judge a file unchanged; the memo lives in a JSON file of the store's local folder, written
atomically, and a memo that cannot be read is only a memo: the videos are hashed again.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from ...cache.artifacts import write_atomic
from .frames import file_sha256

MEMO_FILE = "video-sha256.json"


class VideoHashes:
    def __init__(self) -> None:
        self._known: dict[str, str] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _version(path: Path) -> str:
        stat = path.stat()
        return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"

    def _load(self, memo: Path) -> None:
        try:
            stored = json.loads(memo.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(stored, dict):
            self._known.update({k: v for k, v in stored.items() if isinstance(v, str)})

    def of(self, paths: list[Path], folder: Path) -> list[str]:
        """The sha256 of each video, hashing only those this process and the memo in
        `folder` do not know; the memo is written back when any was hashed."""
        memo = folder / MEMO_FILE
        with self._lock:
            self._load(memo)
            versions = [self._version(path) for path in paths]
            hashed = False
            for path, version in zip(paths, versions):
                if version not in self._known:
                    self._known[version] = file_sha256(path)
                    hashed = True
            if hashed:
                folder.mkdir(parents=True, exist_ok=True)
                write_atomic(memo, json.dumps(self._known, sort_keys=True).encode())
            return [self._known[version] for version in versions]
