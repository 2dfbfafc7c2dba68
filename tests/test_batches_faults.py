"""--batch when things go wrong: a batch that expires, a line that fails, a run stopped with
Ctrl-C while its batch runs (status, batches ls, batches cancel), two processes on one store,
two stores sharing PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter


from fake_batches import FakeBatches
from fake_openai import Reply
from batch_kills import RUNNER, killed_at
from helpers import cli_args, request_identity, run_cli
from replay import ANSWERABLE, replay_model
from test_batches import FAST, batches  # noqa: F401 (the fake batch API fixture)
import warm_spawn



def answered(fake: FakeBatches) -> Counter:
    """How many times each distinct request was run by the provider, over every batch."""
    return Counter(request_identity(r) for r in fake.requests if r.get("_path") == "batch")


def test_an_expired_batch_has_its_finished_lines_kept_and_the_rest_sent_again(batches, tmp_path):
    batches.expire_next = 1  # the first batch (generation) runs half its lines, then expires
    assert run_cli("run", cli_args(batches, tmp_path / "store", extra=FAST)) == 0
    unrun = ANSWERABLE - ANSWERABLE // 2
    assert batches.batch_sizes[0] == ANSWERABLE and unrun in batches.batch_sizes[1:]
    assert sorted(batches.lines_submitted.values()).count(2) == unrun
    assert set(answered(batches).values()) == {1}  # no request was answered (paid) twice
    records = [json.loads(path.read_text()) for path in (tmp_path / "store" / "batches").glob(
        "*.json")]
    assert sum(record["resent"] for record in records) == unrun  # counted


def test_a_failed_line_is_an_error_row_as_an_interactive_failure_is(batches, tmp_path, published):
    replay = replay_model(published)
    failing = "watering"

    def sometimes_down(request: dict) -> Reply:
        if failing in str(request["messages"]):
            return Reply(status=500, content="the server had an error")
        return replay(request)

    batches.responders["gen"] = sometimes_down
    interactive = cli_args(batches, tmp_path / "interactive", extra=("--max-attempts", "2",
                                                                       "--retry-delay", "0"))
    batched = cli_args(batches, tmp_path / "batched", extra=(*FAST, "--max-attempts", "2"))
    first = run_cli("run", interactive)
    failed_calls = sum(failing in str(r["messages"]) for r in batches.requests)
    assert failed_calls, "the scripted failure matched no request"
    batches.reset_counts()
    assert run_cli("run", batched) == first == 1  # a trigger lost: exit status 1 both ways
    from test_batches import tables
    interactive_rows, batched_rows = tables(tmp_path / "interactive"), tables(tmp_path / "batched")
    for stage, frame in interactive_rows.items():
        assert batched_rows[stage].drop("attempts", strict=False).equals(
            frame.drop("attempts", strict=False)), stage


def test_ctrl_c_leaves_the_batch_running_status_lists_it_and_cancel_stops_it(
        batches, tmp_path, prefect_server, capsys):
    batches.completion_delay = 3600.0
    store = tmp_path / "store"
    args = cli_args(batches, store, extra=FAST)
    created = threading.Event()
    looked = threading.Event()  # the run records the batch id, then looks at the batch
    batches.on_event = lambda event, _: (created.set() if event == "create" else
                                       looked.set() if event == "retrieve" else None)
    process = warm_spawn.Popen([sys.executable, "-c", RUNNER, "run", *args],
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
    assert process.returncode == 130
    assert "1 provider batches keep running" in errors and "batches cancel --all" in errors
    assert batches.batches["batch_1"]["status"] == "in_progress"  # not cancelled by Ctrl-C

    capsys.readouterr()
    assert run_cli("status", cli_args(batches, store)) == 0
    status = capsys.readouterr().out
    assert "batches     1 pending" in status and "batch_1" in status and "0 min old" in status
    assert run_cli("batches", ["ls", "--pending", "--store", str(store)]) == 0
    assert "batch_1" in capsys.readouterr().out
    assert run_cli("batches", ["cancel", "--all", "--store", str(store)]) == 0
    assert "cancelling batch_1" in capsys.readouterr().out
    assert batches.batches["batch_1"]["status"] == "cancelled"

    batches.completion_delay = 0.1
    assert run_cli("run", args) == 0  # the cancelled batch ran nothing: its lines go again
    assert batches.lines_submitted.most_common(1)[0][1] == 2
    assert set(answered(batches).values()) == {1}


def test_two_processes_on_one_store_submit_each_request_once(batches, tmp_path, prefect_server):
    batches.completion_delay = 1.0
    args = cli_args(batches, tmp_path / "store", extra=FAST)
    processes = [warm_spawn.Popen([sys.executable, "-c", RUNNER, "run", *args],
                                  env=dict(os.environ, PREFECT_API_URL=prefect_server),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(2)]
    try:
        assert [process.wait(timeout=300) for process in processes] == [0, 0]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert batches.lines_submitted and not batches.twice
    assert sum(batches.calls.values()) == 0


def test_two_stores_sharing_a_database_resume_each_others_batch(batches, tmp_path, database,
                                                                prefect_server):
    """A run killed after creating its batch (its id not recorded) resumes from another
    store on the same database, as another host would: it finds the batch by its tag."""
    first = cli_args(batches, tmp_path / "first", extra=(*FAST, "--database", database))
    second = cli_args(batches, tmp_path / "second", extra=(*FAST, "--database", database))
    assert killed_at(batches, "create", ["run", *first], prefect_server)
    assert not (tmp_path / "first" / "batches").exists()  # recorded in the database only
    assert run_cli("run", second) == 0
    assert not batches.twice
    assert sum(batches.calls.values()) == 0
