"""The files of a store, wherever they live: a local folder, or an fsspec URL on object storage
(`s3://bucket/prefix`, through s3fs). Only the artifact store (artifacts.py) uses this module.

Two kinds of write:
- `create`: write once. The object appears whole or not at all, and never replaces one that
  exists: locally a temporary file hard-linked into place (the link fails if the name is taken,
  where a rename would replace it); on S3 a conditional PUT (`If-None-Match: *`), which the
  server refuses with 412 when the key exists, so of many writers racing exactly one wins.
- `replace`: whole-object replacement (a temporary file renamed over the old one; a plain PUT).

Credentials and endpoint come only from the standard AWS_* environment variables, read by
botocore; nothing here takes, stores or prints them. An unknown bucket or refused credentials are
one-line UserErrors (remote.py), checked once, on first use, with HeadBucket.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from fsspec.implementations.local import LocalFileSystem

from ..common.errors import UserError
from ..common.redaction import url_has_secrets
from .remote import check_bucket, is_url, open_filesystem, problem, s3_code

_CONFLICT_RETRIES = 5
"""S3 answers 409 ConditionalRequestConflict while a conflicting write is in flight: retry."""


@dataclass(frozen=True)
class Entry:
    """One stored file: its name relative to the store root, size and modification time."""

    name: str
    size: int
    modified: float


def _modified(info: dict[str, Any]) -> float:
    stamp = info.get("LastModified", info.get("mtime", info.get("created", 0.0)))
    return stamp.timestamp() if isinstance(stamp, datetime) else float(stamp or 0.0)


class Storage:
    """The store's root: a local folder (plain files, as always) or an object-storage URL."""

    def __init__(self, location: str | Path):
        text = str(location)
        if is_url(text):
            if url_has_secrets(text):
                raise UserError("a store URL carries no credentials or options (s3://bucket/"
                                "prefix): credentials come from AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY, the endpoint from AWS_ENDPOINT_URL")
            self.url = text.rstrip("/")
            self.fs, self.base = open_filesystem(self.url)
            self.local_root: Path | None = None
        else:
            self.local_root = Path(text).expanduser()
            self.url = str(self.local_root)
            self.fs, self.base = LocalFileSystem(), str(self.local_root)
        self._checked = self.local_root is not None
        self._lock = threading.Lock()

    @property
    def is_local(self) -> bool:
        return self.local_root is not None

    def location(self, name: str) -> str:
        """Where `name` (relative to the root) is: a local path or a URL."""
        if self.local_root is not None:
            return str(self.local_root / name)
        return f"{self.url}/{name}"

    def _full(self, name: str) -> str:
        return f"{self.base.rstrip('/')}/{name}" if name else self.base

    # Errors: one line each, never a traceback, never a credential.

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Turn what object storage answers about access into one-line UserErrors; a missing
        object stays FileNotFoundError, which callers expect."""
        if self.local_root is not None:
            yield
            return
        self._check()
        try:
            yield
        except (FileNotFoundError, FileExistsError):
            raise
        except Exception as exc:
            found = problem(exc, self.url)
            if found is None:
                raise
            raise UserError(found) from None

    def _check(self) -> None:
        """Once per store and process: the bucket exists and the credentials are accepted."""
        if self._checked:
            return
        with self._lock:
            if not self._checked:
                check_bucket(self.fs, self.url)
                self._checked = True

    # Writes.

    def create(self, name: str, data: bytes) -> bool:
        """Write `name` once: True when this call created it, False when it already existed
        (left untouched). A reader sees nothing or the whole file."""
        if self.local_root is not None:
            return self._create_local(self.local_root / name, data)
        with self.errors():
            for attempt in range(_CONFLICT_RETRIES):
                try:
                    self.fs.pipe_file(self._full(name), data, mode="create")
                    return True
                except FileExistsError:
                    return False
                except OSError as exc:
                    # s3fs maps 412 to FileExistsError only when the server names the condition
                    # (AWS does, SeaweedFS does not): read the code itself.
                    code = s3_code(exc)
                    if code in ("PreconditionFailed", "412"):
                        return False
                    if code in ("ConditionalRequestConflict", "409") \
                            and attempt < _CONFLICT_RETRIES - 1:
                        time.sleep(0.05 * 2 ** attempt)
                        continue
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _create_local(path: Path, data: bytes) -> bool:
        tmp = write_temporary(path, data)
        try:
            os.link(tmp, path)  # fails with EEXIST instead of replacing, unlike a rename
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            # A file system without hard links (some SMB mounts): O_EXCL still never replaces,
            # but a reader may see the file while it is being written.
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return True
        finally:
            Path(tmp).unlink(missing_ok=True)

    def replace(self, name: str, data: bytes) -> None:
        """Write `name` whole, replacing what was there: readers see the old or the new."""
        if self.local_root is not None:
            write_atomic(self.local_root / name, data)
            return
        with self.errors():
            self.fs.pipe_file(self._full(name), data)

    def remove(self, name: str) -> None:
        """Remove `name`; nothing happens when it is gone already."""
        if self.local_root is not None:
            (self.local_root / name).unlink(missing_ok=True)
            return
        with self.errors():
            try:
                self.fs.rm_file(self._full(name))
            except FileNotFoundError:
                pass

    def move(self, name: str, target: str) -> bool:
        """Move `name` to `target` (both relative to the root): a rename in a folder, a copy
        then a delete on object storage. False when `name` is gone already (another process
        moved it)."""
        if self.local_root is not None:
            destination = self.local_root / target
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(self.local_root / name, destination)
            except FileNotFoundError:
                return False
            return True
        with self.errors():
            try:
                self.fs.copy(self._full(name), self._full(target))
            except FileNotFoundError:
                return False
            self.remove(name)
        return True

    def touch(self, name: str) -> None:
        """Mark a local file as just used (its time); object storage cannot change an object's
        time without rewriting it, so callers keep a marker there instead."""
        if self.local_root is not None:
            try:
                os.utime(self.local_root / name)
            except OSError:
                pass  # a read-only store still serves reads

    # Reads.

    def read(self, name: str) -> bytes:
        """The bytes of `name`; FileNotFoundError when it does not exist."""
        if self.local_root is not None:
            return (self.local_root / name).read_bytes()
        with self.errors():
            return self.fs.cat_file(self._full(name))

    def info(self, name: str) -> Entry | None:
        """Size and time of `name`, or None when it does not exist."""
        if self.local_root is not None:
            try:
                stat = (self.local_root / name).stat()
            except (FileNotFoundError, NotADirectoryError):
                return None
            return Entry(name, stat.st_size, stat.st_mtime)
        with self.errors():
            try:
                found = self.fs.info(self._full(name))
            except FileNotFoundError:
                return None
        if found.get("type") != "file":
            return None
        return Entry(name, int(found.get("size") or 0), _modified(found))

    def files(self, folder: str, starting: str = "") -> list[Entry]:
        """Every file under `folder` (recursively; names relative to the root) whose path below
        it starts with `starting`, sorted by name; empty when there is none. One listing
        request per 1000 objects on S3."""
        if self.local_root is not None:
            top = self.local_root / folder
            found = []
            for directory, _, names in os.walk(top):
                for file_name in names:
                    path = Path(directory) / file_name
                    if not path.relative_to(top).as_posix().startswith(starting):
                        continue
                    try:
                        stat = path.stat()
                    except FileNotFoundError:
                        continue  # removed while listing
                    found.append(Entry(path.relative_to(self.local_root).as_posix(),
                                       stat.st_size, stat.st_mtime))
            return sorted(found, key=lambda entry: entry.name)
        with self.errors():
            try:
                listed = self.fs.find(self._full(folder), detail=True,
                                      **({"prefix": starting} if starting else {}))
            except FileNotFoundError:
                return []
        prefix = self.base.rstrip("/") + "/"
        return sorted((Entry(path[len(prefix):], int(info.get("size") or 0), _modified(info))
                       for path, info in listed.items() if info.get("type") == "file"),
                      key=lambda entry: entry.name)

    def open_input(self, name: str) -> Any:
        """A binary file object for Parquet readers: they read the footer and columns straight
        from the store, no local copy."""
        if self.local_root is not None:
            return open(self.local_root / name, "rb")
        with self.errors():
            return self.fs.open(self._full(name), "rb")


def write_atomic(path: Path, data: bytes) -> None:
    """Write bytes to a local file (exports, reports) so that `path` holds either the old
    content or all of the new."""
    tmp = write_temporary(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_temporary(path: Path, data: bytes) -> str:
    """A synced temporary file beside `path` (same file system, so it can be linked or
    renamed into place); its name starts with a dot and ends in .tmp, for gc to recognise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp
