"""The Prefect API a command's flows report to: the server PREFECT_API_URL names; else, for a
run or a re-judging, none (its stages run without Prefect, flows/wiring.py) unless it asks for
a temporary server of its own (`--temporary-prefect-server`); for a sweep, whose process groups
and deployments need one, a temporary server of its own.

Prefect's own temporary server (its ephemeral mode) is started from inside the process that
runs the flows, which imports Prefect's whole server (database models, routes, migrations):
about 66 MB and 3 s of CPU in a process that only needs the client. Here the same server
(Prefect's app factory under uvicorn, the UI off, Prefect's own settings; a request that met a
locked SQLite database is run again inside it, prefect_server/app.py) runs as a child process
in a session of its own, started early by a command that will run a flow (its seconds of
start-up overlap the command's imports and checks), and this process's settings point at it
while its flows run. A sweep's process groups are told its address like any server's. It is
stopped when the command ends.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..common.environment import seconds_from_environment
from ..common.errors import UserError

START_TIMEOUT_ENV = "PROACTFLOW_PREFECT_SERVER_TIMEOUT"
"""Seconds a command waits for its temporary server to answer (default `START_TIMEOUT`)."""
START_TIMEOUT = 600.0
"""Generous: on a loaded machine the server's imports alone took over 20 s (Prefect's own
limit, which failed runs that would have gone well). Waiting ends earlier when it answers or
when its process ends."""
PROGRESS_AFTER = 5.0
"""Seconds of waiting after which a line says what the command waits for."""
PARENT_ENV = "PROACTFLOW_PREFECT_SERVER_PARENT"
"""The pid of the command a temporary server serves: it stops when that process is gone
(app.py)."""


def start_timeout() -> float:
    return seconds_from_environment(START_TIMEOUT_ENV, START_TIMEOUT, zero_allowed=False,
                                    expected="give the seconds to wait for the temporary "
                                             "Prefect server, a positive number")


class TemporaryServer:
    """One Prefect server for this command, on a free port of the loopback interface.

    It runs in a session of its own: a terminal's Ctrl-C goes to the command's whole process
    group, and a server stopped by it under a run still reporting its states made that run hang
    for a minute or print Prefect's "Error logging to API" dump (issue #31). The command stops
    it when it ends, after its last report."""

    def __init__(self) -> None:
        # Bound here and held until the server serves on it (serve.py): no other process can
        # take the port in between. Not listening yet: an ask before the server serves is
        # refused at once, as on a port nobody holds.
        self._bound: socket.socket | None = socket.socket()
        self._bound.bind(("127.0.0.1", 0))
        self.port = self._bound.getsockname()[1]
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.process: subprocess.Popen[bytes] | None = None
        self.log: Path | None = None
        self.ready = False

    def start(self) -> None:
        environment = {**os.environ, "PREFECT_UI_ENABLED": "0",
                       "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
                       "PREFECT_SERVER_ANALYTICS_ENABLED": "false", PARENT_ENV: str(os.getpid())}
        if "prefect.settings" in sys.modules:  # settings changed in this process count too
            from prefect.settings import get_current_settings

            environment.update(get_current_settings().to_environment_variables(
                exclude_unset=True))
        descriptor, log = tempfile.mkstemp(prefix="proactflow-prefect-server-", suffix=".log")
        self.log = Path(log)
        assert self._bound is not None
        with os.fdopen(descriptor, "wb") as output, self._bound:
            self.process = subprocess.Popen(
                self.command(self._bound.fileno()), env=environment,
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True, pass_fds=(self._bound.fileno(),))
        self._bound = None  # the server's now: this process's copy is closed
        atexit.register(self.stop)

    def command(self, descriptor: int) -> list[str]:
        return server_command(descriptor)

    def wait_ready(self, timeout: float) -> None:
        """Return once the server answers; a one-line UserError if its process ends (with the
        last line of its log) or it takes longer than `timeout`. After `PROGRESS_AFTER` s, a
        line on standard error says what the command waits for."""
        assert self.process is not None
        started = time.monotonic()
        told = False
        while not self.ready:
            if self.process.poll() is not None:
                raise UserError(f"the temporary Prefect server stopped as it started (exit "
                                f"status {self.process.returncode}: {self.last_log_line()}): "
                                "start one with 'prefect server start' and set PREFECT_API_URL")
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2):
                    self.ready = True
            except (urllib.error.URLError, OSError):
                waited = time.monotonic() - started
                if waited > timeout:
                    raise UserError(f"the temporary Prefect server did not answer within "
                                    f"{timeout:g} s ({START_TIMEOUT_ENV} sets how long to wait): "
                                    "start one with 'prefect server start' and set "
                                    "PREFECT_API_URL") from None
                if not told and waited >= PROGRESS_AFTER:
                    print(f"waiting for the temporary Prefect server to answer (pid "
                          f"{self.process.pid}, at most {timeout:g} s: {START_TIMEOUT_ENV})",
                          file=sys.stderr, flush=True)
                    told = True
                time.sleep(0.1)

    def last_log_line(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines() if self.log else []
        except OSError:
            lines = []
        return next((line.strip() for line in reversed(lines) if line.strip()),
                    "it printed nothing")

    def stop(self, wait: float = 10.0) -> None:
        """Stop the server's session (the server and anything it started): asked, then, after
        `wait` seconds, forced; `wait=0` forces at once. One that never answered holds nothing
        of the command's: it is asked and not waited for (it would finish starting first, which
        made a command that stopped at a check of its own wait for seconds)."""
        if self.process is not None and self.process.poll() is None and not self.ready and wait:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        elif self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM if wait else signal.SIGKILL)
                self.process.wait(timeout=wait or None)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            except ProcessLookupError:  # it ended meanwhile
                pass
        if self._bound is not None:  # never started
            self._bound.close()
            self._bound = None
        if self.log is not None:
            self.log.unlink(missing_ok=True)
            self.log = None


def server_command(descriptor: int) -> list[str]:
    """The command of a server of Prefect's app on the bound socket `descriptor`, which the
    child process inherits (serve.py)."""
    spec = importlib.util.find_spec("prefect")  # found without importing it (seconds)
    assert spec is not None and spec.origin is not None
    packages = Path(spec.origin).parent.parent
    # The packages' folder in place of the current one on sys.path, before any import (what
    # uvicorn's --app-dir was for): a folder named like a package where the command was started
    # (a checkout of proactflow on another branch) supplies no code to the server.
    return [sys.executable, "-c", "import sys; sys.path[0] = sys.argv[1]; "
            "from proactflow.prefect_server.serve import main; main()", str(packages),
            str(descriptor)]


_server: TemporaryServer | None = None


def _could_configure_prefect() -> bool:
    """Whether a file Prefect reads its settings from is there and could name a server: its
    profiles (PREFECT_PROFILES_PATH, else PREFECT_HOME's or ~/.prefect's profiles.toml), or a
    prefect.toml, a pyproject.toml with a [tool.prefect] table or a .env with PREFECT_
    variables in the current folder."""
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    profiles = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")
    mentions = ((profiles, "PREFECT_API_URL"), (Path("prefect.toml"), ""),
                (Path("pyproject.toml"), "tool.prefect"), (Path(".env"), "PREFECT_"))
    for path, text in mentions:
        try:
            if path.is_file() and text in path.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def reports_to_prefect() -> bool:
    """Whether PREFECT_API_URL names a server, in the environment or in Prefect's settings.
    Prefect's settings are read (importing Prefect: a second of CPU and 36 MB) only where
    something beside the environment could name one: Prefect is imported already (settings
    changed in this process count), or one of its settings files is there."""
    if os.environ.get("PREFECT_API_URL", "").strip():
        return True
    if "prefect.settings" not in sys.modules and not _could_configure_prefect():
        return False
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def _needs_own_server(exactly: bool) -> bool:
    """No PREFECT_API_URL and Prefect's temporary servers allowed. Before Prefect is imported
    (seconds), the environment alone is looked at (`exactly=False`): a profile that names a
    server is seen later (`_settled`), and the server started by then is stopped unused."""
    if not exactly and "prefect.settings" not in sys.modules:
        allowed = os.environ.get("PREFECT_SERVER_EPHEMERAL_ENABLED", "true").strip().lower()
        return not os.environ.get("PREFECT_API_URL") and allowed not in ("0", "false", "no",
                                                                           "off")
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    return not PREFECT_API_URL.value() and bool(PREFECT_SERVER_EPHEMERAL_ENABLED.value())


def start_temporary_server() -> None:
    """Start this command's temporary server now, in the background, unless PREFECT_API_URL
    names one: it takes seconds, which the command's imports and checks overlap (call it
    first thing)."""
    global _server
    if _server is None and _needs_own_server(exactly=False):
        _server = TemporaryServer()
        _server.start()


def _settled() -> TemporaryServer | None:
    """This command's temporary server, started now if needed and not yet; None (and one
    started on a guess stopped) when Prefect's settings name a server."""
    global _server
    if not _needs_own_server(exactly=True):
        if _server is not None:
            _server.stop(wait=0)
            _server = None
        return None
    start_temporary_server()
    return _server


def api_url() -> str | None:
    """The API this command's flows will report to: its temporary server's, else
    PREFECT_API_URL."""
    from prefect.settings import PREFECT_API_URL

    server = _settled()
    return server.api_url if server is not None else PREFECT_API_URL.value()


def stop_at_once() -> None:
    """Stop the temporary server now, not waiting for it (a second Ctrl-C)."""
    if _server is not None:
        _server.stop(wait=0)


def stop_temporary_server() -> bool:
    """Stop this process's temporary server, as its exit would, and forget it (a command run
    in a longer-lived process, such as a test's); whether there was one."""
    global _server
    server, _server = _server, None
    if server is None:
        return False
    server.stop()
    return True


def temporary_server_process() -> subprocess.Popen[bytes] | None:
    """The process of this command's temporary server, if it has one (tests watch it)."""
    return _server.process if _server is not None else None


@contextmanager
def prefect_api() -> Iterator[None]:
    """Run the body's flows against PREFECT_API_URL, or against this command's temporary
    server (started here if it was not yet)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    server = _settled()
    if server is None:
        yield
        return
    server.wait_ready(start_timeout())
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield
