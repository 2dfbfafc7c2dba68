"""Helpers for tests that drive the CLI against a fake endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from fake_openai import FakeOpenAI
from replay import JUDGE_PROMPT, SAMPLE_CORPUS
import warm_spawn


def cli_args(fake: FakeOpenAI, store: Path, *, eval_model: str = "openai/gen",
             judge_model: str = "openai/judge", corpus: Path = SAMPLE_CORPUS,
             extra: tuple[str, ...] = ()) -> list[str]:
    return ["--eval-model", eval_model, "--eval-api-base", fake.url,
            "--judge-model", judge_model, "--judge-api-base", fake.url,
            "--corpus", str(corpus), "--judge-prompt", str(JUDGE_PROMPT),
            "--store", str(store), *extra]


def run_cli(command: str, args: list[str]) -> int:
    from proactflow.cli import main

    return main([command, *args])


def read_json(path: Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))



def request_identity(request: dict) -> str:
    """What a fake server's request asked, for telling calls apart across runs."""
    return json.dumps(request["messages"], sort_keys=True)


def killed_mid_run(fake: FakeOpenAI, model: str, runner: str, args: list[str],
                   prefect_server: str, after: int) -> list[str]:
    """Runs `python -c runner run *args` (a runner that registers the suite under test, then
    calls the CLI), kills it with SIGKILL (no cleanup of any kind) once `model` has answered
    `after` calls, and returns the identities of the requests `model` got; the fake's counts
    and request log are then reset for the run that resumes."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = dict(os.environ, PREFECT_API_URL=prefect_server)
    process = warm_spawn.Popen([sys.executable, "-c", runner, "run", *args], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while fake.calls[model] < after:
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the run did not get that far in 120 s"
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()
    made = [request_identity(r) for r in fake.requests if r["model"] == model]
    fake.reset_counts()
    return made
