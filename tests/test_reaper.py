"""A test run killed with its servers up leaves nothing running (reaper.py): a pytest run that
brings up the servers the suite uses (PostgreSQL, SeaweedFS, the Prefect test server, Chromium,
and llama.cpp's server where its extra is installed) is killed with SIGKILL of its whole process
group, and within 20 s no process of it is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import reaper

TESTS = Path(__file__).resolve().parent
LEFT_WITHIN_SECONDS = 20
UP_WITHIN_SECONDS = 300

HELD_RUN = '''
import os, threading
from pathlib import Path

import pytest


def test_held_with_its_servers_up(request, postgres_server, seaweed, prefect_server, tmp_path):
    import browser
    if browser.chromium_path():
        request.addfinalizer(browser.Browser("about:blank").close)
    try:
        import gguf, llama_cpp.server  # noqa: F401
    except ImportError:
        pass
    else:
        from llama_model import write_model
        from llama_server import LlamaServer
        model = write_model(tmp_path / "tiny.gguf")
        request.addfinalizer(LlamaServer({"tiny": model}, tmp_path).start().stop)
    Path(os.environ["HELD_RUN_READY"]).write_text("up")
    threading.Event().wait(600)  # held until the test that started this run kills it
'''


def commands(pids: list[int]) -> list[str]:
    found = []
    for pid in pids:
        try:
            found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                         .decode(errors="replace")[:200])
        except OSError:
            pass
    return found


def test_a_killed_run_leaves_no_process(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc")
    (tmp_path / "test_held.py").write_text(HELD_RUN)
    ready = tmp_path / "ready"
    tag = f"{os.environ[reaper.TAG]}/held-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, HELD_RUN_READY=str(ready), PYTHONPATH=str(TESTS),
               **{reaper.TAG: tag})
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p",
                            "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=",
                            "--rootdir", str(tmp_path), str(tmp_path / "test_held.py")],
                           cwd=tmp_path, env=env, stdout=open(tmp_path / "run.log", "w"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + UP_WITHIN_SECONDS
        while not ready.exists():
            assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the servers were not up in time"
            time.sleep(0.2)
        up = commands(reaper.tagged(tag))
        for server in ("postgres", "weed", "proactflow.prefect_server.serve"):
            assert any(server in command for command in up), (server, up)
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        deadline = time.monotonic() + LEFT_WITHIN_SECONDS
        while (left := reaper.tagged(tag)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, commands(left)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
        reaper.end_tagged(tag, grace=1)
