"""What every benchmark here measures of a command: its wall time, the CPU time of its whole
process tree and its peak memory, taken the same way everywhere so that figures compare.

- CPU: user + system seconds of the child and of every descendant it waited for (the temporary
  Prefect server included), from the kernel's rusage when the child ends: robust to other load
  on the machine, unlike wall time.
- Peak memory: the largest resident set of any one process of the tree (ru_maxrss), which is the
  run's own process for `proactflow run`. The command is started by a small process of its own
  (`_REPORTER`), never straight from the benchmark's: Linux counts in a process's ru_maxrss the
  high-water mark of the memory it was forked from, so a command started by a benchmark holding
  800 MB reported at least 800 MB (a fake server keeping every request it was sent did that to
  `video_episode.py`'s long runs, 2026-11-29).
- CPU per call: `(cold - cached) / calls` (`per_call_ms`), the same command run twice on one
  store, the second answered from the per-call cache: the fixed cost of a run cancels out, but
  its noise (about a second of CPU) needs thousands of calls to fade; with a few hundred, time
  the calls' window inside the run instead (ci_figures.py's RUNNER).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    output: str


_REPORTER = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as report:
    json.dump({"cpu": usage.ru_utime + usage.ru_stime, "maxrss_kb": usage.ru_maxrss,
               "code": os.waitstatus_to_exitcode(status)}, report)
"""
"""Starts the command (a fork of this small process, so its ru_maxrss is its own) and writes
its exit code and rusage, its waited descendants included, to the file named first."""


def measured(command: list[str], env: dict[str, str], cwd: Path | None = None, *,
             codes: tuple[int, ...] = (0,)) -> Measured:
    """Run `command` to its end; SystemExit with its output's tail if its exit code is not
    in `codes`."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory(prefix="proactflow-measure-") as folder:
        report = Path(folder) / "usage.json"
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-c", _REPORTER, str(report), *command],
                                   env=env, cwd=cwd, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        assert process.stdout is not None
        output = process.stdout.read()
        process.wait()
        wall = time.monotonic() - started
        try:
            usage = json.loads(report.read_text())
        except (OSError, ValueError):
            raise SystemExit(f"{' '.join(command[:4])} ... could not be measured (exit "
                             f"{process.returncode}):\n{output[-3000:]}") from None
    if usage["code"] not in codes:
        raise SystemExit(f"{' '.join(command[:4])} ... failed ({usage['code']}):\n"
                         f"{output[-3000:]}")
    return Measured(wall, usage["cpu"], usage["maxrss_kb"] / 1024, output)


def child_env(prefect_home: Path) -> dict[str, str]:
    """This environment, with a Prefect home of the benchmark's own and a temporary server (no
    PREFECT_API_URL), analytics off and litellm's bundled price map."""
    env = dict(os.environ, PREFECT_HOME=str(prefect_home),
               PREFECT_SERVER_ANALYTICS_ENABLED="false", LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.pop("PREFECT_API_URL", None)
    return env


def per_call_ms(cold: Measured, cached: Measured, calls: int) -> float:
    """Milliseconds of CPU per call: the cold run's CPU less the cached run's, over its calls."""
    return 1000 * (cold.cpu_s - cached.cpu_s) / max(calls, 1)


def start_async_fake(latency: float) -> tuple[subprocess.Popen[bytes], int]:
    """benchmarks/async_fake.py (`latency` seconds a call) in a process of its own, on a free
    loopback port, returned with its port once it answers; the caller ends it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, str(Path(__file__).parent / "async_fake.py"),
                                str(port), str(latency)])
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    return process, port
