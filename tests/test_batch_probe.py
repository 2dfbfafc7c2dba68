"""--batch where an endpoint has no batch API (issue #36, item 1): the batch API probed once
before the plan, `--batch auto` calling such an endpoint interactively (and saying so per role),
`--batch` stopping before any call, the server's own sentence reaching the user, and batch
records that never got an id, or were cancelled, shown as what they are."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from fake_batches import FakeBatches
from fake_openai import FakeOpenAI
from helpers import cli_args, run_cli
from replay import replay_judge, replay_model

FILES_UNSET = "files_settings is not set, set it on your config.yaml file."
"""The litellm proxy's answer on its files routes until its config sets files_settings."""
FAST = ("--batch-poll", "0.05", "--max-attempts", "1")


@pytest.fixture
def plain(published):
    """An OpenAI-compatible server with chat completions and no batch API at all."""
    server = FakeOpenAI({"gen": replay_model(published), "judge": replay_judge(published)})
    with server:
        yield server
    assert not server.responder_errors, server.responder_errors


@pytest.fixture
def gateway(published):
    """A server with the files and batches routes, each answering 500 as an unconfigured
    litellm proxy does."""
    server = FakeBatches({"gen": replay_model(published), "judge": replay_judge(published)},
                         completion_delay=0.1)
    server.files_unconfigured = FILES_UNSET
    with server:
        yield server
    assert not server.responder_errors, server.responder_errors


def records(store: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted((store / "batches").glob("*.json"))]


def test_batch_auto_without_a_batch_api_runs_interactively_and_says_so_per_role(
        plain, tmp_path, capsys):
    store = tmp_path / "store"
    assert run_cli("run", cli_args(plain, store, extra=("--batch", "auto"))) == 0
    out = capsys.readouterr().out
    for role, model in (("model under test", "openai/gen"), ("judge", "openai/judge")):
        [line] = [line for line in out.splitlines() if line.startswith(f"batch       {role} ")]
        assert f"{model}: interactive" in line and "has no batch API" in line, line
        assert "/batches answered HTTP 404" in line, line
    assert "'s batch API" not in out  # no role claims a batch API it does not have
    assert plain.calls["gen"] and plain.calls["judge"]  # answered interactively
    assert not (store / "batches").exists()  # no batch was ever begun

    assert run_cli("status", cli_args(plain, store, extra=("--batch", "auto"))) == 0
    assert "pending" not in capsys.readouterr().out


def test_forced_batch_without_a_batch_api_stops_before_any_call(plain, tmp_path, capsys):
    assert run_cli("run", cli_args(plain, tmp_path / "store", extra=("--batch",))) == 2
    captured = capsys.readouterr()
    [line] = captured.err.strip().splitlines()
    assert "--batch: the endpoint http://127.0.0.1:" in line and "has no batch API" in line
    assert "HTTP 404" in line and "--batch auto" in line
    assert sum(plain.calls.values()) == 0 and "plan" not in captured.out


def test_a_gateway_whose_files_api_is_not_set_up_is_called_interactively_with_its_reason(
        gateway, tmp_path, capsys):
    assert run_cli("run", cli_args(gateway, tmp_path / "store", extra=("--batch", "auto"))) == 0
    out = capsys.readouterr().out
    batch_lines = [line for line in out.splitlines() if line.startswith("batch ")]
    assert len(batch_lines) == 2 and all(FILES_UNSET in line and "HTTP 500" in line
                                         for line in batch_lines), batch_lines
    assert gateway.calls["gen"] and not gateway.lines_submitted
    assert gateway.route_requests == {"GET batches": 1}  # probed once for both roles

    assert run_cli("run", cli_args(gateway, tmp_path / "forced", extra=("--batch",))) == 2
    assert FILES_UNSET in capsys.readouterr().err


def test_a_batches_route_that_fails_twice_is_no_batch_api_and_once_is_a_passing_fault(
        published, tmp_path, capsys):
    # What the real litellm proxy answers on GET /v1/batches without files settings: a bare
    # "Internal Server Error", no sentence naming the cause.
    server = FakeBatches({"gen": replay_model(published), "judge": replay_judge(published)},
                         completion_delay=0.05)
    with server:
        server.bare_500_batch_reads = 2
        assert run_cli("run", cli_args(server, tmp_path / "store",
                                       extra=("--batch", "auto", *FAST))) == 0
        out = capsys.readouterr().out
        batch_lines = [line for line in out.splitlines() if line.startswith("batch ")]
        assert len(batch_lines) == 2 and all(
            "interactive" in line and "answered HTTP 500 twice: Internal Server Error" in line
            for line in batch_lines), batch_lines
        assert server.route_requests["GET batches"] == 2 and not server.lines_submitted

        server.bare_500_batch_reads = 1  # one 500, then the route answers: a batch API
        assert run_cli("run", cli_args(server, tmp_path / "again", extra=(
            "--batch", "auto", *FAST))) == 0
        assert "openai's batch API" in capsys.readouterr().out
        assert server.lines_submitted
    assert not server.responder_errors, server.responder_errors


def test_batch_mode_is_decided_per_role_by_its_own_endpoint(plain, published, tmp_path,
                                                              capsys):
    with FakeBatches({"judge": replay_judge(published)}, completion_delay=0.1) as batches:
        args = ["--eval-model", "openai/gen", "--eval-api-base", plain.url,
                *cli_args(batches, tmp_path / "store", extra=("--batch", "auto", *FAST))[4:]]
        assert run_cli("run", args) == 0
        out = capsys.readouterr().out
        assert "batch       model under test openai/gen: interactive" in out
        assert "batch       judge openai/judge: openai's batch API" in out
        assert plain.calls["gen"] and batches.lines_submitted and not batches.calls["judge"]


def test_the_servers_sentence_reaches_every_error_line_and_row_and_no_record_stays_pending(
        gateway, tmp_path, capsys):
    """The batches route answers, the upload does not: the run stops its calls with the
    server's own words, and the record of the batch that was never created is closed at once."""
    import polars as pl

    gateway.unconfigured_routes = frozenset({"files"})
    store = tmp_path / "store"
    assert run_cli("run", cli_args(gateway, store, extra=("--batch", *FAST))) == 1
    capsys.readouterr()  # the last line's cause is item 7's (issue #36); the rows carry it
    errors = [message for path in (store / "artifacts").rglob("*.parquet")
              for frame in [pl.read_parquet(path)] if {"status", "message"} <= set(frame.columns)
              for message in frame.filter(pl.col("status") == "error")["message"].to_list()]
    assert errors and all(FILES_UNSET in error for error in errors), errors[:3]
    assert [record["state"] for record in records(store)] == ["never_created"]
    assert run_cli("status", cli_args(gateway, store, extra=("--batch",))) == 0
    assert "pending" not in capsys.readouterr().out


def _batch_request(tag: str) -> dict:
    return {"endpoint": "/v1/chat/completions", "input_file_id": "file-0",
            "completion_window": "24h", "metadata": {"proactflow_tag": tag * 32}}


def _record(fake: FakeOpenAI, store: Path, **fields):
    from proactflow.batches.registry import BatchRecord, LocalBatchRegistry

    record = BatchRecord(fields.pop("tag", "a" * 32), "openai", None, "openai/gen",
                         ("k1", "k2"), api_base=fake.url, **fields)
    asyncio.run(LocalBatchRegistry(store / "batches").put(record))
    return record


def test_a_record_without_an_id_is_not_pending_and_cancel_drops_it(published, tmp_path,
                                                                     capsys):
    store = tmp_path / "store"
    with FakeBatches({"gen": replay_model(published)}) as batches:
        _record(batches, store)  # its process died before the batch was created
        assert run_cli("batches", ["ls", "--store", str(store)]) == 0
        assert "(id not recorded" in capsys.readouterr().out
        from proactflow.batches.listing import pending_lines
        from proactflow.batches.registry import LocalBatchRegistry

        lines = pending_lines(LocalBatchRegistry(store / "batches").read())
        assert lines and "pending" not in lines[0] and "not known to exist" in lines[0]
        assert run_cli("batches", ["cancel", "--all", "--store", str(store)]) == 0
        assert "dropped (id not recorded" in capsys.readouterr().out
        assert [record["state"] for record in records(store)] == ["never_created"]
        assert run_cli("batches", ["ls", "--pending", "--store", str(store)]) == 0
        assert "no batches pending" in capsys.readouterr().out


def test_cancel_finds_a_batch_by_its_tag_and_says_what_it_cannot_cancel(published, plain,
                                                                         tmp_path, capsys):
    store = tmp_path / "store"
    with FakeBatches({"gen": replay_model(published)}, completion_delay=3600) as batches:
        created = batches._create(_batch_request("b"))
        _record(batches, store, tag="b" * 32)  # created; its id never recorded
        _record(plain, store, tag="c" * 32)  # at a server that cannot say
        assert run_cli("batches", ["cancel", "--all", "--store", str(store)]) == 1
        out = capsys.readouterr().out
        assert f"cancelling {created['id']}" in out and "cancelled at openai" in out
        [cannot] = [line for line in out.splitlines() if line.startswith("cannot cancel")]
        assert "(id not recorded, tag cccccccccccc)" in cannot and "404" in cannot
        assert batches.batches[created["id"]]["status"] == "cancelled"
        states = {record["tag"][0]: record["state"] for record in records(store)}
        assert states == {"b": "cancelled", "c": "submitting"}


def test_a_cancelled_batch_is_shown_as_its_provider_says(published, tmp_path, capsys):
    store = tmp_path / "store"
    with FakeBatches({"gen": replay_model(published)}, completion_delay=3600) as batches:
        created = batches._create(_batch_request("d"))
        _record(batches, store, tag="d" * 32, batch_id=created["id"], state="cancelling")
        batches.batches[created["id"]]["status"] = "cancelled"  # the provider finished it
        assert run_cli("batches", ["ls", "--pending", "--store", str(store)]) == 0
        assert "no batches pending" in capsys.readouterr().out
        assert run_cli("batches", ["ls", "--store", str(store)]) == 0
        assert "cancelled" in capsys.readouterr().out
        assert [record["state"] for record in records(store)] == ["cancelled"]
