"""The Prefect API the tests run against: the server `prefect_test_harness` starts (uvicorn,
Prefect's app, an SQLite database of its own, a copy of one migrated once per machine:
prefect_database.py), one per pytest process (each pytest-xdist worker has its own, so that a
test reading "the latest run" reads its own), used through the same settings as the harness's,
by the tests that ask for it (the `prefect_server` fixture) and only while they run. The others
run as a command without PREFECT_API_URL runs, untracked (flows/wiring.py): the same stages and
wiring, and no flow or task run to record. Reporting costs CPU on both sides:
`tests/test_mllm_suite.py` took 61 s of CPU tracked, 41 s untracked, and the servers' share of a
full test run with every suite's file tracked was 259 s of about 1,560 s (2026-11-29).

Three differences from the harness: a pytest-xdist worker starts it in the background as the
worker starts (the suite's workers all need it; its imports and migrations then overlap the
first tests instead of holding up the first test that needs it), the wait is bounded in
wall-clock time, however loaded the machine is, and Prefect's app is served as a command's
temporary server serves it (proactflow/prefect_server/app.py): write requests one at a time, one
that met a locked SQLite database run again inside the server. Prefect's plain app answers such
a request 503 and its client sleeps about 2 s (then 4, 8, ...) before trying again: every task of a
run with tags asks for its tags' concurrency slots, an UPDATE that met another write 13
times in `tests/test_batches.py` and `tests/test_faults.py` alone (2026-11-29).

Prefect's background services all stay on (in this mode: the event persister, the task-run
recorder, triggers and actions, the event stream): the tests read events, task runs and
automations through the API. Measured idle, the server takes about 1.2 s of CPU a minute, most
of it the task queue's polling every 250 ms, which no setting changes; with every optional
service off it was 1.0 s, and an API call about 31 ms instead of 33 ms.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import prefect_database

from proactflow.prefect_server.api import server_command

START_SECONDS = 240
DRAIN_SECONDS = 30
"""How long the server's stop waits for Prefect's event worker to send what it holds."""


class PrefectTestServer:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="proactflow-prefect-server-"))
        # Bound here and handed to the server, as a command's temporary server is: a port only
        # found free could be taken by another worker's fake before the server bound it.
        bound = socket.socket()
        bound.bind(("127.0.0.1", 0))
        self.port = bound.getsockname()[1]
        self.api_url = f"http://127.0.0.1:{self.port}/api"
        prefect_database.seed(self.folder / "prefect-test.db")  # migrated once per machine
        database = f"sqlite+aiosqlite:///{self.folder / 'prefect-test.db'}"
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1", "PREFECT_SERVER_DATABASE_CONNECTION_URL": database}
        env.pop("PREFECT_API_URL", None)
        self.log = self.folder / "server.log"
        with open(self.log, "wb") as log, bound:
            self.process = subprocess.Popen(
                server_command(bound.fileno()), env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, pass_fds=(bound.fileno(),))

    def wait(self) -> str:
        """The API's URL once it answers; RuntimeError with the reason when it does not."""
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                with urllib.request.urlopen(f"{self.api_url}/health", timeout=5):
                    return self.api_url
            except OSError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"the Prefect test server exited ({self.process.returncode}):"
                                   f" {self.log.read_text(errors='replace')[-1500:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Prefect test server did not answer in {START_SECONDS} s")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


_started: PrefectTestServer | None = None


def start_early() -> None:
    """Start this process's server now, without waiting for it (a pytest-xdist worker)."""
    global _started
    if _started is None:
        _started = PrefectTestServer()


def stop_unused() -> None:
    global _started
    if _started is not None:
        _started.stop()
        _started = None


@contextmanager
def serving() -> Iterator[str]:
    """This process's server, known as Prefect's default one (so that no code starts an
    ephemeral server of its own); its API URL. Code reports to it only inside `reporting_to`.
    Stopped at the end, after Prefect's log and event workers have sent what they hold."""
    global _started
    from prefect.server.api.server import SubprocessASGIServer

    server, _started = _started or PrefectTestServer(), None
    try:
        url = server.wait()
        known = SubprocessASGIServer(port=server.port)
        known.server_process, known.running = server.process, True
        prior_default = SubprocessASGIServer._instances.get(None)
        SubprocessASGIServer._instances[None] = known
        try:
            yield url
            with reporting_to(url):
                _drain()
        finally:
            SubprocessASGIServer._instances.pop(server.port, None)
            if prior_default is not None:
                SubprocessASGIServer._instances[None] = prior_default
            else:
                SubprocessASGIServer._instances.pop(None, None)
    finally:
        server.stop()


@contextmanager
def reporting_to(url: str) -> Iterator[str]:
    """Code in this block reports to the server at `url`, as the harness sets it up: the URL in
    Prefect's settings and in the process-wide settings context. After it, the settings are as
    before: a test that does not ask for the server runs as a command without PREFECT_API_URL
    does, untracked, whichever tests ran before it in this process. What Prefect's log and
    event workers still hold they send in the background to the URL they were started with
    (drained once, as the server stops: draining after each test waited up to 240 s on the
    events worker's connection now and then)."""
    import prefect.context
    import prefect.settings

    with prefect.settings.temporary_settings(updates={prefect.settings.PREFECT_API_URL: url}):
        with prefect.context._temporary_global_settings_context(
                prefect.context.get_settings_context()):
            yield url


def _drain() -> None:
    import inspect

    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.utilities.asyncutils import run_coro_as_sync

    async def drain() -> None:
        try:
            result = APILogWorker.instance().drain()
            if inspect.isawaitable(result):
                await result
        except RuntimeError:  # never started
            pass
        # Bounded: the events worker's drain was seen waiting up to 240 s on its connection.
        result = EventsWorker.drain_all(timeout=DRAIN_SECONDS)
        if inspect.isawaitable(result):
            await result

    run_coro_as_sync(drain())
