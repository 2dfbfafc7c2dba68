"""`run --batch` with Anthropic models end to end, through the fake Messages and Message Batches
APIs (tests/fake_anthropic_batches.py): the batched run's tables and cache records equal the
interactive run's, not one request is submitted twice (counted by key at the fake), and
`batches cancel` reaches an Anthropic batch."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from fake_anthropic_batches import FakeAnthropic
from proactflow.batches.anthropic_wire import split_wire_id
from batch_kills import RUNNER, killed_at
from helpers import cli_args, run_cli
from replay import ANSWERABLE, replay_judge, replay_model
from test_batches import call_records, tables
import warm_spawn

FAST = ("--batch", "--batch-poll", "0.05")
KEY = "sk-ant-fake-key"


@pytest.fixture
def claude(published, monkeypatch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", KEY)
    server = FakeAnthropic({"claude-gen": replay_model(published),
                            "claude-judge": replay_judge(published)},
                           api_key=KEY, completion_delay=0.1)
    with server:
        yield server
    assert not server.responder_errors, server.responder_errors


def submitted_per_key(fake: FakeAnthropic) -> Counter[str]:
    """Times each request was submitted, by its key (a line's wire custom_id also carries its
    batch's tag, which differs from one batch to the next)."""
    keys: Counter[str] = Counter()
    for wire_id, times in fake.submitted.items():
        keys[split_wire_id(wire_id)[1]] += times
    return keys


def args(fake: FakeAnthropic, store: Path, extra: tuple[str, ...] = ()) -> list[str]:
    return cli_args(fake, store, eval_model="anthropic/claude-gen",  # type: ignore[arg-type]
                    judge_model="anthropic/claude-judge",
                    extra=("--eval-api-key-env", "FAKE_ANTHROPIC_KEY",
                           "--judge-api-key-env", "FAKE_ANTHROPIC_KEY", *extra))


def test_batched_anthropic_run_equals_interactive_run(claude, tmp_path):
    interactive, batched = tmp_path / "interactive", tmp_path / "batched"
    assert run_cli("run", args(claude, interactive)) == 0
    asked = sum(claude.interactive_calls.values())
    assert asked and not claude.submitted

    assert run_cli("run", args(claude, batched, FAST)) == 0
    assert sum(claude.interactive_calls.values()) == asked  # not one interactive call
    per_key = submitted_per_key(claude)
    assert sum(per_key.values()) == asked and set(per_key.values()) == {1}
    # Generation in one batch; judging: one call alone while the judge's structured-output
    # format is learnt, then the others together.
    assert [len(batch.lines) for batch in claude.batches.values()] == \
        [ANSWERABLE, 1, ANSWERABLE - 1]
    sent = sorted(json.dumps(params, sort_keys=True) for params in claude.batch_params)
    asked_interactively = sorted(json.dumps(body, sort_keys=True)
                                 for body in claude.interactive_bodies)
    assert sent == asked_interactively  # the same /v1/messages bodies

    assert tables(batched).keys() == tables(interactive).keys()
    for stage, frame in tables(interactive).items():
        assert tables(batched)[stage].equals(frame), stage
    assert call_records(batched) == call_records(interactive)




@pytest.mark.parametrize("phase", ["create", "retrieve", "results"])
def test_killed_in_any_phase_resumes_without_submitting_a_line_twice(claude, tmp_path, phase,
                                                                     prefect_server):
    """kill -9 right after the batch was created (its id not yet recorded: found again by the
    tag its lines carry), while waiting, while reading results: the run started again submits
    no line a second time, and an interactive run after it finds everything cached."""
    store = tmp_path / "store"
    run_args = args(claude, store, FAST)
    assert killed_at(claude, phase, ["run", *run_args], prefect_server), \
        f"the run ended before reaching {phase}"
    assert list((store / "batches").glob("*.json")), "no batch recorded before its creation"

    assert run_cli("run", run_args) == 0
    if phase == "create":  # its id never recorded: the batches were listed to find its tag
        assert claude.api_requests["list"] >= 1
    per_key = submitted_per_key(claude)
    assert per_key and set(per_key.values()) == {1}, per_key
    assert sum(claude.interactive_calls.values()) == 0
    assert run_cli("run", args(claude, store)) == 0  # everything is cached
    assert sum(claude.interactive_calls.values()) == 0


def test_ctrl_c_then_batches_cancel_stops_the_anthropic_batch(claude, tmp_path, prefect_server,
                                                              capsys):
    """Ctrl-C leaves the Anthropic batch running; `batches cancel --all` reaches it with the
    key the run named, and the next run sends its lines again (the batch ran none)."""
    import os
    import signal
    import subprocess
    import sys
    import threading

    claude.completion_delay = 3600.0
    store = tmp_path / "store"
    run_args = args(claude, store, FAST)
    created = threading.Event()
    looked = threading.Event()  # the run records the batch id, then looks at the batch
    claude.on_event = lambda event, _: (created.set() if event == "create" else
                                       looked.set() if event == "retrieve" else None)
    process = warm_spawn.Popen([sys.executable, "-c", RUNNER, "run", *run_args],
                               env=dict(os.environ, PREFECT_API_URL=prefect_server),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert created.wait(120), "no batch was created"
        assert looked.wait(120), "the batch was never looked at"
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    claude.on_event = None
    assert process.returncode == 130 and "batches cancel --all" in errors
    [batch] = claude.batches.values()
    assert batch.cancel_at is None  # Ctrl-C did not cancel it
    capsys.readouterr()
    assert run_cli("batches", ["cancel", "--all", "--store", str(store)]) == 0
    assert f"cancelling {batch.id}" in capsys.readouterr().out
    assert claude.api_requests["cancel"] == 1 and batch.cancel_at is not None

    claude.completion_delay = 0.1
    assert run_cli("run", run_args) == 0
    assert max(submitted_per_key(claude).values()) == 2  # the cancelled batch's lines again
