"""A throw-away PostgreSQL cluster for tests: initdb into a temporary folder, trust
authentication, a free port on 127.0.0.1 only, stopped and removed at the end.

The server refuses to run as root, so as root the cluster is made and run by the `postgres` user
(runuser) in a folder that user can reach. fsync is off: a test server needs no durability.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import uuid
from glob import glob
from pathlib import Path

from ports import free_port


class PostgresUnavailable(Exception):
    """No PostgreSQL server binaries here, or the cluster would not start."""


def server_bindir() -> Path:
    """Where initdb and pg_ctl are: `pg_config --bindir`, else Debian's versioned folders."""
    candidates = []
    if shutil.which("pg_config"):
        done = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        if done.returncode == 0:
            candidates.append(Path(done.stdout.strip()))
    candidates += [Path(p) for p in sorted(glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    if shutil.which("initdb"):
        candidates.append(Path(shutil.which("initdb") or "").parent)
    for folder in candidates:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    raise PostgresUnavailable("no PostgreSQL server binaries (initdb, pg_ctl): install the "
                              "postgresql package")


class PostgresServer:
    """One cluster; `url(database)` names a database on it, `create_database()` makes one."""

    def __init__(self) -> None:
        self.bindir = server_bindir()
        self.root = Path(tempfile.mkdtemp(prefix="proactflow-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.user = "postgres"
        self._as_root = os.geteuid() == 0
        self._started = False
        self._options = ""

    def _run(self, *command: str, timeout: float = 120) -> None:
        argv = [str(self.bindir / command[0]), *command[1:]]
        if self._as_root:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise PostgresUnavailable(f"{command[0]} failed: {' / '.join(tail)}")

    def start(self) -> "PostgresServer":
        try:
            if self._as_root:
                # mkdtemp makes a 0700 folder of root's: the postgres user must get into it.
                os.chmod(self.root, 0o755)
                shutil.chown(self.root, user="postgres")
            else:
                self.user = os.environ.get("USER") or "postgres"
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.user,
                      "--no-sync", "-E", "UTF8")
            self._options = options = (f"-h 127.0.0.1 -p {self.port} -c unix_socket_directories='' "
                       "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                       "-c max_connections=200")
            self._started = True
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
                      "-w", "-t", "60", "start")
        except (PostgresUnavailable, OSError, LookupError, subprocess.TimeoutExpired) as exc:
            log = self.log.read_text(errors="replace").strip().splitlines()[-2:] \
                if self.log.exists() else []
            self.stop()
            raise PostgresUnavailable(" / ".join([str(exc), *log])) from None
        return self

    def url(self, database: str = "postgres", user: str | None = None) -> str:
        return f"postgresql://{user or self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self, owner: str | None = None) -> str:
        """A new empty database, owned by `owner` (a role made for it) if given; its URL, as
        that owner."""
        import asyncpg

        name = f"t_{uuid.uuid4().hex[:12]}"

        async def create() -> None:
            connection = await asyncpg.connect(self.url(), timeout=30)
            try:
                if owner:
                    await connection.execute(f'CREATE ROLE "{owner}" LOGIN')
                await connection.execute(f'CREATE DATABASE "{name}"'
                                         + (f' OWNER "{owner}"' if owner else ""))
            finally:
                await connection.close()

        asyncio.run(create())
        return self.url(name, owner)

    def require_password(self, role: str, password: str) -> None:
        """`role` gets `password`, and the server asks it for it (the cluster trusts every
        other role, as before): a first pg_hba.conf line for it alone, reloaded."""
        import asyncpg

        hba = self.data / "pg_hba.conf"
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())

        async def set_password() -> None:
            connection = await asyncpg.connect(self.url(), timeout=30)
            try:
                await connection.execute(f"ALTER ROLE \"{role}\" PASSWORD '{password}'")
                await connection.execute("SELECT pg_reload_conf()")
            finally:
                await connection.close()

        async def asked() -> None:  # the reload is the postmaster's, a moment later
            import time

            deadline = time.monotonic() + 30
            while True:
                try:
                    await (await asyncpg.connect(self.url(user=role), password="not-it",
                                                 timeout=30)).close()
                except asyncpg.InvalidPasswordError:
                    return
                assert time.monotonic() < deadline, "the server never asked for a password"
                await asyncio.sleep(0.05)

        asyncio.run(set_password())
        asyncio.run(asked())

    def restart(self) -> float:
        """`pg_ctl restart -m fast`, as an administrator would: every session ended, the server
        back on the same port with the same options. Its duration, seconds."""
        import time

        began = time.monotonic()
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w",
                  "-t", "60", "restart")
        return time.monotonic() - began

    def away(self, seconds: float) -> None:
        """Stopped (`-m fast`) for `seconds`, then started again as before: a database that
        stays away longer than a run waits for it."""
        import time

        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
        time.sleep(seconds)
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", self._options,
                  "-w", "-t", "60", "start")

    def stop(self) -> None:
        if self._started:
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop",
                          timeout=60)
            except (PostgresUnavailable, subprocess.TimeoutExpired):
                pass
            self._started = False
        shutil.rmtree(self.root, ignore_errors=True)
