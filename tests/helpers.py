"""Helpers for tests that drive the CLI against a fake endpoint."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from fake_openai import FakeOpenAI, Reply
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, synthetic_model
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


def gated_models(*names: str, wait: float = 120):
    """Models answering only once each of them has been asked (then at once): the runs that
    call them reach their judge together, whenever each process started. Returns the responders,
    the gate (set once every model was asked), when each model first answered, and the models
    that answered before the gate opened, after waiting `wait` seconds for it (a test that needs
    the runs together asserts that there is none)."""
    asked: set[str] = set()
    everyone = threading.Event()
    answered: dict[str, float] = {}
    ungated: set[str] = set()
    lock = threading.Lock()

    def responder(name: str):
        def respond(request: dict) -> Reply:
            with lock:
                asked.add(name)
                if asked == set(names):
                    everyone.set()
            if not everyone.wait(wait):
                with lock:
                    ungated.add(name)
            with lock:
                answered.setdefault(name, time.monotonic())
            return Reply(content=f"{name}: {synthetic_model(request).content}")
        return respond

    return {name: responder(name) for name in names}, everyone, answered, ungated
