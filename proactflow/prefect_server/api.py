"""The Prefect API a command's flows report to: the server PREFECT_API_URL names, else a
temporary one of the command's own.

Prefect's own temporary server (its ephemeral mode) is started from inside the process that
runs the flows, which imports Prefect's whole server (database models, routes, migrations):
about 66 MB and 3 s of CPU in a process that only needs the client, and every `run` paid them
(benchmarks/run_benchmark.py: the peak RSS of a cold run went over 500 MB). Here the same
server (Prefect's app factory under uvicorn, the UI off, Prefect's own settings; a request that
met a locked SQLite database is run again inside it, prefect_server/app.py) runs as a child
process, started as soon as the command knows it will run a flow, and this process's
settings point at it while its flows run. A sweep's process groups are told its address like
any server's. It is stopped when the command ends.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from typing import Iterator

from ..common.errors import UserError


class TemporaryServer:
    """One Prefect server for this command, on a free port of the loopback interface."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        self.process: subprocess.Popen[bytes] | None = None
        self.ready = False

    def start(self) -> None:
        import prefect
        from prefect.settings import get_current_settings

        environment = {**os.environ, "PREFECT_UI_ENABLED": "0",
                       "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
                       "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                       **get_current_settings().to_environment_variables(exclude_unset=True)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
             "--factory", "proactflow.prefect_server.app:create_app", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "error", "--lifespan", "on"],
            env=environment, stdin=subprocess.DEVNULL)
        atexit.register(self.stop)

    def wait_ready(self, timeout: float) -> None:
        """Return once the server answers; a one-line UserError if it ends or takes longer."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while not self.ready:
            if self.process.poll() is not None:
                raise UserError(f"the temporary Prefect server stopped as it started (exit "
                                f"status {self.process.returncode}): start one with 'prefect "
                                "server start' and set PREFECT_API_URL")
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=2):
                    self.ready = True
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise UserError(f"the temporary Prefect server did not answer within "
                                    f"{timeout:g} s: start one with 'prefect server start' "
                                    "and set PREFECT_API_URL") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


_server: TemporaryServer | None = None


def _needs_own_server() -> bool:
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    return not PREFECT_API_URL.value() and bool(PREFECT_SERVER_EPHEMERAL_ENABLED.value())


def start_temporary_server() -> None:
    """Start this command's temporary server now, in the background, unless PREFECT_API_URL
    names one: it takes seconds, which the command's checks can overlap."""
    global _server
    if _server is None and _needs_own_server():
        _server = TemporaryServer()
        _server.start()


def api_url() -> str | None:
    """The API this command's flows will report to: its temporary server's, else
    PREFECT_API_URL."""
    from prefect.settings import PREFECT_API_URL

    return _server.api_url if _server is not None else PREFECT_API_URL.value()


@contextmanager
def prefect_api() -> Iterator[None]:
    """Run the body's flows against PREFECT_API_URL, or against this command's temporary
    server (started here if it was not yet)."""
    from prefect.settings import (PREFECT_API_URL,
                                  PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
                                  temporary_settings)

    start_temporary_server()
    if _server is None:
        yield
        return
    _server.wait_ready(float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()))
    with temporary_settings(updates={PREFECT_API_URL: _server.api_url}):
        yield
