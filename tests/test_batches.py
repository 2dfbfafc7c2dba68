"""--batch end to end: ProactBench through the fake OpenAI files and batches API, equal to the
interactive run, sharing its per-call cache both ways."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from fake_batches import FakeBatches
from helpers import cli_args, run_cli
from replay import ANSWERABLE, replay_judge, replay_model, synthetic_judge

pytestmark = pytest.mark.usefixtures("prefect_server")

FAST = ("--batch", "--batch-poll", "0.05")


@pytest.fixture
def batches(published):
    server = FakeBatches({"gen": replay_model(published), "judge": replay_judge(published),
                          "judge2": synthetic_judge}, completion_delay=0.1)
    with server:
        yield server
    assert not server.responder_errors, server.responder_errors


def tables(store: Path) -> dict[str, pl.DataFrame]:
    """Every stage table of the store, by stage, without the calls' wall times."""
    found = {}
    for path in sorted((store / "artifacts").glob("*/*.parquet")):
        frame = pl.read_parquet(path)
        found[path.parent.name] = frame.drop([c for c in frame.columns if c == "latency_s"])
    return found


def call_records(store: Path) -> dict[str, dict]:
    from proactflow.cache.calls import CallCache

    cache = CallCache(store / "calls")
    try:
        records = {key: dict(cache.get(key) or {}) for key in cache._results.iterkeys()}
    finally:
        cache.close()
    for record in records.values():
        record.pop("latency_s", None)
    return records


def test_batched_run_equals_interactive_run(batches, tmp_path):
    interactive, batched = tmp_path / "interactive", tmp_path / "batched"
    assert run_cli("run", cli_args(batches, interactive)) == 0
    interactive_calls = sum(batches.calls.values())
    batches.reset_counts()

    assert run_cli("run", cli_args(batches, batched, extra=FAST)) == 0
    assert sum(batches.calls.values()) == 0  # not one interactive call
    assert sum(batches.lines_submitted.values()) == interactive_calls
    assert not batches.twice
    assert batches.authorizations and all(
        header == "Bearer no-key-configured" for header in batches.authorizations)
    # One round of generation: every answerable trigger in one batch.
    assert batches.batch_sizes[0] == ANSWERABLE, batches.batch_sizes

    assert tables(batched).keys() == tables(interactive).keys()
    for stage, frame in tables(interactive).items():
        assert tables(batched)[stage].equals(frame), stage
    assert call_records(batched) == call_records(interactive)


def test_interactive_run_after_a_batched_one_makes_no_call_and_back(batches, tmp_path):
    store = tmp_path / "store"
    assert run_cli("run", cli_args(batches, store, extra=FAST)) == 0
    sent = sum(batches.lines_submitted.values())
    assert sent and sum(batches.calls.values()) == 0
    assert run_cli("run", cli_args(batches, store, extra=("--refresh", "judgments"))) == 0
    judged_interactively = sum(batches.calls.values())
    assert judged_interactively and batches.calls["gen"] == 0

    # and the other way: a batched re-judging of what the interactive one cached sends nothing
    batches.reset_counts()
    before = sum(batches.lines_submitted.values())
    assert run_cli("rejudge", cli_args(batches, store, extra=FAST)) == 0
    assert sum(batches.lines_submitted.values()) == before
    assert sum(batches.calls.values()) == 0
    records = json.dumps(sorted(call_records(store)))
    assert records


RUNNER = "import sys; from proactflow.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("phase", ["upload", "create", "retrieve", "content"])
def test_killed_in_any_phase_resumes_without_sending_a_line_twice(batches, tmp_path, phase,
                                                                  prefect_server):
    """kill -9 while uploading, after the batch was created but before its id was recorded,
    while waiting, while reading results: the run started again finds its batch (by its tag
    when no id was recorded) and no request is ever in two batches."""
    import os
    import signal
    import subprocess
    import sys
    import threading

    store = tmp_path / "store"
    args = cli_args(batches, store, extra=FAST)
    process = subprocess.Popen([sys.executable, "-c", RUNNER, "run", *args],
                               env=dict(os.environ, PREFECT_API_URL=prefect_server),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed = threading.Event()

    def kill_at(event: str, subject: str) -> None:
        if event == phase and not killed.is_set():
            process.send_signal(signal.SIGKILL)
            process.wait()
            killed.set()

    batches.on_event = kill_at
    try:
        process.wait(timeout=180)
    finally:
        if process.poll() is None:
            process.kill()
    assert killed.is_set(), f"the run ended before reaching {phase}"
    batches.on_event = None
    records = list((store / "batches").glob("*.json"))
    assert records, "the batch was not recorded before the provider was asked to create it"

    assert run_cli("run", args) == 0
    assert not batches.twice, f"requests sent twice: {batches.twice}"
    assert sum(batches.calls.values()) == 0
    assert run_cli("run", cli_args(batches, store)) == 0  # everything is cached
    assert sum(batches.calls.values()) == 0
