"""What Prefect shows after Ctrl-C of a sweep on a server of the user's own (issue #36): every
flow run of the sweep, its own, its in-process pairs' and those of the pairs in its other
process, reaches a final state (Cancelled or Crashed) within seconds, while the terminal
shows proactflow's one line only: no Prefect crash lines, no traceback, no coroutine that was
never awaited."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from replay import JUDGE_PROMPT, scaled_corpus, synthetic_judge, synthetic_model
import warm_spawn

FINAL_WITHIN_S = 30.0
"""Bound on how long the states may take to reach the server after the sweep exits."""


def _sweep_file(tmp_path: Path, fake: FakeOpenAI) -> Path:
    corpus, _ = scaled_corpus(tmp_path, 2)
    models = "".join(f'\n[[models]]\nmodel = "openai/{name}"\napi_base = "{fake.url}"\n'
                     for name in ("synth", "synth2"))
    config = tmp_path / "sweep.toml"
    config.write_text(f"""
name = "{tmp_path.name}"
store = "{tmp_path / 'store'}"
corpus = "{corpus}"
judge_prompt = "{JUDGE_PROMPT}"
concurrency = 2
processes = 2

[[judges]]
model = "openai/judge2"
api_base = "{fake.url}"
{models}""")
    return config


async def _flow_runs_since(began: float, known: frozenset = frozenset()) -> list:
    """The flow runs the server created from about `began` on, but for those in `known`."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import FlowRunSort

    async with get_client() as client:
        runs = await client.read_flow_runs(sort=FlowRunSort.EXPECTED_START_TIME_DESC,
                                           limit=200)
    return [run for run in runs if run.created and run.created.timestamp() >= began - 1
            and run.id not in known]


@pytest.mark.timeout(600)  # two processes' imports and a sweep's checks, on a busy machine
def test_ctrl_c_of_a_sweep_leaves_every_flow_run_final(tmp_path, prefect_server):
    held = threading.Event()  # the pairs' requests wait here: the sweep is mid-flight
    fake = FakeOpenAI({"synth": synthetic_model, "synth2": synthetic_model,
                       "judge2": synthetic_judge})
    fake.on_request = lambda request: held.wait(60)
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    began = time.time()
    # The worker's server is shared with the tests before this one: a run one of them created
    # in the second before `began` is not the sweep's (it once made this test fail).
    known = frozenset(run.id for run in asyncio.run(_flow_runs_since(began)))
    with fake:
        process = warm_spawn.Popen(
            [sys.executable, "-m", "proactflow.cli", "sweep", "--config",
             str(_sweep_file(tmp_path, fake))], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 480
            # synth's pair runs in the sweep's process, synth2's in the other one (pairs are
            # dealt in turn): both have asked the fake something.
            while not (fake.calls["synth"] and fake.calls["synth2"]):
                assert process.poll() is None, process.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "the sweep's pairs never called"
                time.sleep(0.05)
            os.killpg(process.pid, signal.SIGINT)  # the whole group, as a terminal does
            try:
                _, stderr = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                raise AssertionError(f"still running 60 s after Ctrl-C: "
                                     f"{process.communicate()[1][-3000:]}") from None
        finally:
            held.set()
    deadline = time.monotonic() + FINAL_WITHIN_S
    while True:  # polled: the states are on the server at once, or within seconds
        runs = asyncio.run(_flow_runs_since(began, known))
        states = {run.name: run.state_type.value if run.state_type else None for run in runs}
        if len(runs) == 3 and set(states.values()) <= {"CANCELLED", "CRASHED"}:
            break
        assert time.monotonic() < deadline, \
            f"not final {FINAL_WITHIN_S:g} s after the sweep ended: {states}\n{stderr[-3000:]}"
        time.sleep(0.2)
    print(f"flow runs after Ctrl-C: {states}")
    # The sweep's own run, the pair in its process and the pair in the other process.
    assert {"openai/synth judged by openai/judge2",
            "openai/synth2 judged by openai/judge2"} < set(states), states
    assert process.returncode == 130, stderr[-3000:]
    assert stderr.count("proactflow: interrupted.") == 1, stderr[-3000:]
    # Prefect's lines about stopped runs went to its server only (lines from before the
    # Ctrl-C, such as a finished stage's "Finished in state Completed()", stay).
    for noise in ("Traceback", "never awaited", "Crash detected", "Crashed(", "Cancelled(",
                  "Finished in state Running"):
        assert noise not in stderr, stderr[-3000:]


def test_after_ctrl_c_prefect_writes_nothing_more_to_the_terminal_but_others_do():
    import logging

    from prefect.logging.configuration import setup_logging
    from prefect.logging.handlers import APILogHandler, PrefectConsoleHandler

    from proactflow.prefect_server.interrupted import console_off

    setup_logging()
    ours = logging.StreamHandler()
    logging.getLogger("proactflow.progress").addHandler(ours)
    handlers = [h for logger in [logging.getLogger(), *[
        logging.getLogger(name) for name in logging.Logger.manager.loggerDict]]
        for h in logger.handlers]
    try:
        console_off()
        record = logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1,
                                   "Crash detected!", None, None)
        consoles = [h for h in handlers if isinstance(h, PrefectConsoleHandler)]
        assert consoles and not any(h.filter(record) for h in consoles)
        assert all(h.filter(record) for h in handlers if isinstance(h, APILogHandler))
        assert ours.filter(record)
    finally:
        logging.getLogger("proactflow.progress").removeHandler(ours)
        for handler in handlers:  # as before, for the tests after this one
            handler.filters = [f for f in handler.filters if type(f).__name__ != "_DropAll"]
