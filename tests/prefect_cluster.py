"""Driving a Prefect server and its workers from tests: the CLI as a subprocess, waiting for
what starts (skipped with the reason where it cannot, failed under CI=true), the API read
over HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from test_prefect_server import post

ROOT = Path(__file__).resolve().parent.parent
START_SECONDS = 120


def optional(request, fixture: str):
    """A session fixture's value, or None where it skipped (under CI=true it fails instead)."""
    try:
        return request.getfixturevalue(fixture)
    except pytest.skip.Exception as exc:
        print(f"without {fixture}: {exc}")
        return None


def prefect(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def wait_until(ready, what: str, process: subprocess.Popen | None = None, *,
               skip: bool = True) -> None:
    """Wait for a server or workers to start; where they cannot, the test is skipped with the
    reason (failed under CI=true, where they must, or when not `skip`)."""
    deadline = time.monotonic() + START_SECONDS
    while not ready():
        reason = None
        if process is not None and process.poll() is not None:
            reason = f"{what}: the process exited"
        elif time.monotonic() > deadline:
            reason = f"{what}: not ready in {START_SECONDS} s"
        if reason is not None:
            if not skip or os.environ.get("CI", "").lower() == "true":
                pytest.fail(reason)
            pytest.skip(reason)
        time.sleep(0.5)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2):
            return True
    except OSError:
        return False


def evaluate_runs(url: str) -> list[dict]:
    return post(url, "/flow_runs/filter", {"deployments": {"name": {"any_": ["evaluate"]}},
                                           "limit": 200, "offset": 0, "sort": "NAME_ASC"})


def worker_of(url: str, run: dict) -> str:
    """The worker that ran a flow run, from the line it logs to the run when it takes it."""
    logs = post(url, "/logs/filter", {"logs": {"flow_run_id": {"any_": [run["id"]]}},
                                      "limit": 200, "offset": 0, "sort": "TIMESTAMP_ASC"})
    found = {m[1] for log in logs
             if (m := re.match(r"Worker '([^']+)' submitting flow run", log["message"]))}
    assert len(found) == 1, (run["name"], found)
    return found.pop()
