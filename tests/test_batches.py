"""--batch end to end: ProactBench through the fake OpenAI files and batches API, equal to the
interactive run, sharing its per-call cache both ways."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from fake_batches import FakeBatches
from batch_kills import killed_at
from helpers import cli_args, run_cli
from fake_openai import Reply
from replay import ANSWERABLE, replay_judge, replay_model, synthetic_judge

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


def latest_artifact(prefect_server: str, key: str):
    import urllib.request

    request = urllib.request.Request(
        f"{prefect_server}/artifacts/filter", method="POST",
        headers={"Content-Type": "application/json"},
        data=json.dumps({"artifacts": {"key": {"any_": [key]}}, "limit": 1, "offset": 0,
                         "sort": "CREATED_DESC"}).encode())
    with urllib.request.urlopen(request) as response:
        found = json.loads(response.read())
    return found[0]["data"] if found else None


def test_batched_run_equals_interactive_run(batches, tmp_path, prefect_server):
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
    # the Prefect UI shows each batch, lines done of its total
    table = latest_artifact(prefect_server, "batches-openai-gen")
    rows = json.loads(table) if isinstance(table, str) else table
    assert rows and rows[-1]["state"] == "completed" \
        and rows[-1]["lines done"] == rows[-1]["lines"] == ANSWERABLE, rows


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


@pytest.mark.parametrize("phase", ["upload", "create", "retrieve", "content"])
def test_killed_in_any_phase_resumes_without_sending_a_line_twice(batches, tmp_path, phase,
                                                                  prefect_server):
    """kill -9 while uploading, after the batch was created but before its id was recorded,
    while waiting, while reading results: the run started again finds its batch (by its tag
    when no id was recorded) and no request is ever in two batches."""
    store = tmp_path / "store"
    args = cli_args(batches, store, extra=FAST)
    assert killed_at(batches, phase, ["run", *args], prefect_server), \
        f"the run ended before reaching {phase}"
    records = list((store / "batches").glob("*.json"))
    assert records, "the batch was not recorded before the provider was asked to create it"

    assert run_cli("run", args) == 0
    assert not batches.twice, f"requests sent twice: {batches.twice}"
    assert sum(batches.calls.values()) == 0
    assert run_cli("run", cli_args(batches, store)) == 0  # everything is cached
    assert sum(batches.calls.values()) == 0


def test_a_model_without_a_batch_api_is_one_line_before_any_call_or_interactive_with_auto(
        batches, tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("DEEPSEEK_KEY", "sk-test")
    no_batches = ("--eval-model", "deepseek/gen", "--eval-api-key-env", "DEEPSEEK_KEY")
    assert run_cli("run", [*cli_args(batches, store, extra=("--batch",)), *no_batches]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "deepseek/gen (deepseek) has no batch API" in error \
        and "--batch auto" in error
    assert sum(batches.calls.values()) == 0 and not batches.lines_submitted

    assert run_cli("run", [*cli_args(batches, store, extra=("--batch", "auto", "--dry-run")),
                           *no_batches]) == 0
    plan = capsys.readouterr().out
    assert "batch       model under test deepseek/gen: interactive (deepseek has no batch " \
           "API" in plan
    assert "batch       judge openai/judge: openai's batch API" in plan
    assert "rounds      generation" not in plan  # generation is interactive


def test_the_plan_prices_a_batched_role_at_both_prices(batches, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-test")
    batches.responders["gpt-4o-mini"] = batches.responders["gen"]
    args = cli_args(batches, tmp_path / "store", eval_model="gpt-4o-mini",
                    extra=("--batch", "--dry-run", "--eval-api-key-env", "FAKE_KEY"))
    assert run_cli("run", args) == 0
    plan = capsys.readouterr().out
    generation = next(line for line in plan.splitlines() if line.startswith("  generation:"))
    assert " in batches vs $" in generation and " interactive; $" in generation
    # A dialogue's earlier trigger is a prefix the provider's cache can serve, in a batch too.
    assert generation.split(" interactive; $")[1].split(" with ~")[0].endswith(" in batches")
    assert "rounds      generation: at most 1 batch (" in plan  # every trigger stands alone


def test_a_judge_refusing_the_structured_format_costs_one_line_then_one_batch(batches, tmp_path,
                                                                            published):
    """The judge's first line learns the format (refused: json_schema; then json_object); the
    calls that waited meanwhile go out together, in one batch."""
    judge = replay_judge(published)

    def no_schema(request: dict):
        if (request.get("response_format") or {}).get("type") == "json_schema":
            return Reply(status=400, content="response_format json_schema is not supported")
        return judge(request)

    batches.responders["judge"] = no_schema
    assert run_cli("run", cli_args(batches, tmp_path / "store", extra=FAST)) == 0
    refused = [r for r in batches.requests
               if (r.get("response_format") or {}).get("type") == "json_schema"]
    assert len(refused) == 1
    assert batches.batch_sizes == [ANSWERABLE, 1, 1, ANSWERABLE - 1]


def test_refresh_asks_again_instead_of_reading_an_ended_batch(batches, tmp_path):
    store = tmp_path / "store"
    assert run_cli("run", cli_args(batches, store, extra=FAST)) == 0
    first = dict(batches.lines_submitted)
    assert run_cli("run", cli_args(batches, store, extra=(*FAST, "--refresh", "responses"))) \
        == 0
    generation = [key for key, count in batches.lines_submitted.items() if count == 2]
    assert len(generation) == ANSWERABLE and all(key in first for key in generation)
