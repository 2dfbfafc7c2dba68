"""Nothing a test run starts outlives it, however the run ends (normal exit, SIGTERM, SIGKILL of
pytest or of its whole process group).

Every pytest process (the run, or each pytest-xdist worker) puts a tag into its environment,
`REAP_WITH_TEST_RUN`, extending the tag it inherited, and starts a watchdog: this file run as a
script, in a session of its own so that a kill of pytest's process group misses it. Every process
the tests start inherits the tag (the servers of the fixtures, PostgreSQL's postmaster that
pg_ctl detaches, Chromium's helpers, `proactflow` subprocesses and the Prefect servers they
start), whatever process group or session it ends up in. When the pytest process is gone, the
watchdog ends every process whose tag starts with that process's own (SIGTERM, then SIGKILL
after a grace period), then exits; it exits as well when it is stopped with its run.

A test that builds a child's environment from scratch would drop the tag: build it from
os.environ (all tests here do).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

TAG = "REAP_WITH_TEST_RUN"
GRACE_SECONDS = 5.0
_watchdogs: list[subprocess.Popen] = []  # kept: a collected Popen of a live child warns


def tagged(prefix: str) -> list[int]:
    """The pids of the processes tagged `prefix` or beneath it (this one excluded)."""
    wanted = f"{TAG}={prefix}".encode()
    beneath = wanted + b"/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        for variable in environ.split(b"\0"):
            if variable == wanted or variable.startswith(beneath):
                found.append(int(entry.name))
                break
    return found


def end_tagged(prefix: str, grace: float = GRACE_SECONDS) -> list[int]:
    """SIGTERM every tagged process, SIGKILL those left after `grace` s; the pids found."""
    first = tagged(prefix)
    for pid in first:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (left := tagged(prefix)) and time.monotonic() < deadline:
        time.sleep(0.1)
    # A process may still fork while it dies: look again until none is left (bounded).
    for _ in range(50):
        if not left:
            break
        for pid in left:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.1)
        left = tagged(prefix)
    return first


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_for_exit(pid: int) -> None:
    """Until `pid` has exited (a pidfd cannot be fooled by a reused pid)."""
    try:
        handle = os.pidfd_open(pid)
    except (AttributeError, OSError):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)
    try:
        select.select([handle], [], [])
    finally:
        os.close(handle)


def start_watchdog() -> str:
    """Tag this process (and so every process it starts) and start its watchdog; the tag."""
    tag = f"{os.environ.get(TAG, 'run')}/{uuid.uuid4().hex[:12]}"
    os.environ[TAG] = tag
    environment = {key: value for key, value in os.environ.items() if key != TAG}
    _watchdogs.append(subprocess.Popen([sys.executable, __file__, str(os.getpid()), tag], env=environment,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True))
    return tag


def main(watched: int, prefix: str) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closed terminal ends the run, not this
    _wait_for_exit(watched)
    end_tagged(prefix)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
