"""A migrated, empty Prefect database that the tests' Prefect servers start from, instead of
each one migrating a fresh SQLite file of its own.

A Prefect server on a new database runs Prefect's 114 migrations before it answers: measured
on the 2-core machine (2026-11-29), a server took 15 to 19 s of CPU to answer on a new file and
7.4 to 9.2 s on one already migrated. A full test run starts about ten: each pytest process's
test server (prefect_test_server.py) and the temporary servers of the commands it runs (on the
database of its PREFECT_HOME), the module servers of test_interrupt.py and
test_prefect_server.py, the nested runs of test_reaper.py.

The database is made once per machine and Prefect version, as `prefect server database
upgrade` makes it, by the run's first pytest process (pytest-xdist's controller, before its
workers start), and kept with the machine's other test caches (beside mypy's, test_types.py);
each server gets a copy of its own. What a server then does is what it does on any database it
finds already migrated, as a user's `prefect server start` does on every start after its first:
it checks the revision, registers the block types and serves. Without a template (one that
could not be made, which is said once), every server migrates its own database, as before."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

CACHE = Path.home() / ".cache" / "proactflow-tests" / "prefect-database"


@functools.cache  # one process seeds many homes: the file names are listed once
def _migrations_digest() -> str:
    """Prefect's version and its SQLite migrations' file names: what a template is made of."""
    spec = importlib.util.find_spec("prefect")  # without importing Prefect (seconds)
    assert spec is not None and spec.origin is not None
    versions = Path(spec.origin).parent / "server" / "database" / "_migrations" / "versions"
    names = sorted(path.name for path in (versions / "sqlite").glob("*.py"))
    material = "\n".join([importlib.metadata.version("prefect"), *names])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def template() -> Path | None:
    """The migrated database for this Prefect, if it was made (`make_template`)."""
    path = _template_path()
    return path if path.exists() else None


def _template_path() -> Path:
    return CACHE / f"prefect-{_migrations_digest()}.db"


def make_template() -> Path | None:
    """The migrated database, made now unless it is there (one process makes it; others wait
    for it); None, with a warning, if it could not be made (then every server migrates its
    own, as before)."""
    try:
        return _made_template()
    except (OSError, subprocess.SubprocessError, sqlite3.Error) as error:  # e.g. no writable home
        warnings.warn(f"no migrated Prefect database for the tests' servers (each migrates "
                      f"its own): {error}")
        return None


def _made_template() -> Path:
    found = template()
    if found is not None:
        return found
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = template()
        if found is not None:
            return found
        with tempfile.TemporaryDirectory(dir=CACHE) as work:
            made, clean = Path(work) / "made.db", Path(work) / "clean.db"
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
            env.update(PREFECT_HOME=str(Path(work) / "home"),
                       PREFECT_SERVER_ANALYTICS_ENABLED="false",
                       PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{made}")
            done = subprocess.run([sys.executable, "-m", "prefect", "server", "database",
                                   "upgrade", "-y"], env=env, capture_output=True, text=True,
                                  timeout=600)
            if done.returncode != 0:
                raise subprocess.SubprocessError((done.stdout + done.stderr)[-500:])
            # One self-contained file (Prefect's SQLite runs in WAL mode): what every copy is.
            with sqlite3.connect(made) as database:
                database.execute("VACUUM INTO ?", (str(clean),))
            database.close()
            path = _template_path()
            os.replace(clean, path)
            return path


def seed(database: Path) -> None:
    """Put a copy of the migrated database at `database`, unless a file is there or no
    template was made."""
    source = template()
    if source is None or database.exists():
        return
    database.parent.mkdir(parents=True, exist_ok=True)
    partial = database.with_name(f".{database.name}.{os.getpid()}.partial")
    try:
        shutil.copyfile(source, partial)
        os.replace(partial, database)
    except OSError:  # the server then migrates a new file of its own
        partial.unlink(missing_ok=True)


def seeded_home(home: Path) -> Path:
    """`home` made a PREFECT_HOME whose default database (prefect.db, what a temporary server
    and `prefect server start` use) is already migrated."""
    home.mkdir(parents=True, exist_ok=True)
    seed(home / "prefect.db")
    return home
