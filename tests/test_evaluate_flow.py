"""End-to-end: the CLI runs the Prefect flow against a fake endpoint over real HTTP."""

from __future__ import annotations

import csv
import json
from collections import Counter

import polars as pl
import pytest

from fake_openai import Reply
from helpers import cli_args, read_json, run_cli
from replay import (ANSWERABLE, DIALOGUES, SAMPLE_RESULTS, TRIGGERS, read_jsonl,
                    scaled_corpus)


def published_counts() -> dict[str, Counter]:
    """PASS/PARTIAL/FAIL per phase, straight from the published labels."""
    counts: dict[str, Counter] = {}
    for row in read_jsonl(SAMPLE_RESULTS):
        for point in row["trigger_points"]:
            phase = point["evaluation_rubric"]["type"]
            counts.setdefault(phase, Counter())[point["evaluation_result"]["score"]] += 1
    return counts


def test_replayed_run_reproduces_published_metrics(fake, store, tmp_path, prefect_server):
    out = tmp_path / "out"
    assert run_cli("run", cli_args(fake, store, extra=("--out", str(out)))) == 0

    expected = published_counts()
    metrics = read_json(out / "metrics.json")
    for phase, counts in expected.items():
        stats = metrics["aggregate_trigger_stats"][phase]
        unanswerable = 1 if phase == "RECOVERY" else 0  # the trigger without a user message
        assert (stats["PASS"], stats["PARTIAL"], stats["FAIL"], stats["SKIPPED"]) == \
            (counts["PASS"], counts["PARTIAL"], counts["FAIL"], unanswerable)
        evaluated = sum(counts.values())
        name = phase.lower()
        assert metrics["metrics"][f"eval/proactivity_{name}_pass_rate"] == \
            pytest.approx(counts["PASS"] / evaluated)
        assert metrics["metrics"][f"eval/proactivity_{name}_weighted_score"] == \
            pytest.approx((counts["PASS"] + 0.5 * counts["PARTIAL"]) / evaluated)
    everything = sum(expected.values(), Counter())
    total = sum(everything.values())
    assert metrics["metrics"]["eval/proactivity_overall_weighted_score"] == \
        pytest.approx((everything["PASS"] + 0.5 * everything["PARTIAL"]) / total)
    assert metrics["metrics"]["eval/proactivity_total_dialogues"] == DIALOGUES

    with open(out / "phase_scores.csv", newline="") as handle:
        rows = {row["phase"]: row for row in csv.DictReader(handle)}
    assert int(rows["OVERALL"]["pass"]) == everything["PASS"]
    assert int(rows["OVERALL"]["evaluated"]) == total

    results = [r for r in read_jsonl(out / "results.jsonl")]
    published = read_jsonl(SAMPLE_RESULTS)
    assert [r["unique_id_eval"] for r in results] == [r["unique_id_eval"] for r in published]
    for mine, theirs in zip(results, published):
        for phase, stats in theirs["trigger_stats"].items():
            assert {k: mine["trigger_stats"][phase][k] for k in ("PASS", "PARTIAL", "FAIL")} \
                == {k: stats[k] for k in ("PASS", "PARTIAL", "FAIL")}
        answered = [t["assistant_response"] for t in mine["turn_records"]
                    if t["assistant_response"] is not None]
        assert answered == [t["assistant_response"] for t in theirs["turn_records"]]
    assert fake.calls == {"gen": ANSWERABLE, "judge": ANSWERABLE}


def test_identical_rerun_makes_no_call(fake, store):
    args = cli_args(fake, store)
    assert run_cli("run", args) == 0
    fake.reset_counts()
    assert run_cli("run", args) == 0
    assert sum(fake.calls.values()) == 0


def test_rejudge_calls_only_the_new_judge(fake, store, tmp_path):
    assert run_cli("run", cli_args(fake, store)) == 0
    fake.reset_counts()
    out = tmp_path / "rejudged"
    assert run_cli("rejudge", cli_args(fake, store, judge_model="openai/judge2",
                                       extra=("--out", str(out)))) == 0
    assert fake.calls == {"judge2": ANSWERABLE}
    metrics = read_json(out / "metrics.json")
    assert sum(sum(c.values()) for c in metrics["aggregate_trigger_stats"].values()) == TRIGGERS
    fake.reset_counts()
    assert run_cli("rejudge", cli_args(fake, store, judge_model="openai/judge2")) == 0
    assert sum(fake.calls.values()) == 0


def test_rejudge_without_cached_responses_is_a_clear_error(fake, store, capsys):
    assert run_cli("rejudge", cli_args(fake, store)) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("proactflow: error: no cached responses of openai/gen")
    assert "\n" not in error
    assert sum(fake.calls.values()) == 0


def test_failing_model_becomes_counted_error_rows_and_is_retried(fake, store, tmp_path):
    fake.responders["down"] = lambda request: Reply(status=503, content="overloaded")
    out = tmp_path / "out"
    args = cli_args(fake, store, eval_model="openai/down",
                    extra=("--out", str(out), "--limit", "2", "--max-attempts", "2",
                           "--retry-delay", "0.01"))
    assert run_cli("run", args) == 1  # triggers were lost: cron must see a bad night
    # 2 dialogues of the sample hold 7 triggers; each call tried twice.
    assert fake.calls["down"] == 12  # 6 triggers of the first 2 dialogues, 2 attempts each
    assert fake.calls["judge"] == 0
    scores = {r["phase"]: r for r in pl.read_csv(out / "phase_scores.csv", null_values="-").to_dicts()}
    assert scores["OVERALL"]["generation_errors"] == 6
    assert scores["OVERALL"]["evaluated"] == 0
    assert scores["OVERALL"]["weighted_score"] is None
    metrics = read_json(out / "metrics.json")
    assert metrics["metrics"]["eval/proactivity_overall_weighted_score"] is None
    assert sum(s["SKIPPED"] for s in metrics["aggregate_trigger_stats"].values()) == 6


def test_prefect_shows_named_run_tasks_and_score_table_without_secrets(fake, store, monkeypatch,
                                                                    prefect_server):
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.logging.handlers import APILogHandler
    from prefect.client.schemas.sorting import FlowRunSort, TaskRunSort

    secret = "sk-" + "test-PREFECT-PLANTED-abcdefghijklmnopqrstu"  # no key-shaped literal
    monkeypatch.setenv("PLANTED_API_KEY", secret)
    args = cli_args(fake, store, judge_model="openai/judge2",
                    extra=("--limit", "2", "--eval-api-key-env", "PLANTED_API_KEY",
                           "--judge-api-key-env", "PLANTED_API_KEY"))
    assert run_cli("run", args) == 0

    async def read():
        await APILogHandler.aflush()  # logs travel to the server in batches
        async with get_client() as client:
            runs = await client.read_flow_runs(
                flow_run_filter=FlowRunFilter(name=FlowRunFilterName(
                    any_=["openai/gen judged by openai/judge2"])),
                sort=FlowRunSort.START_TIME_DESC, limit=1)
            run = runs[0]
            for _ in range(150):  # task runs reach the server as events, stored a moment later
                tasks = await client.read_task_runs(
                    flow_run_filter=FlowRunFilter(id={"any_": [run.id]}), limit=20,
                    sort=TaskRunSort.EXPECTED_START_TIME_ASC)
                if len(tasks) >= 4:
                    break
                await asyncio.sleep(0.2)
            # Through the REST API, filtering on the flow run alone: the client's helper also
            # sends a task-run filter, which hides artifacts created by the flow itself.
            response = await client._client.post("/artifacts/filter", json={
                "artifacts": {"flow_run_id": {"any_": [str(run.id)]}},
                "limit": 20, "offset": 0, "sort": "CREATED_DESC"})
            response.raise_for_status()
            artifacts = response.json()
            response = await client._client.post("/logs/filter", json={
                "logs": {"flow_run_id": {"any_": [str(run.id)]}},
                "limit": 200, "offset": 0, "sort": "TIMESTAMP_ASC"})
            response.raise_for_status()
            return run, tasks, artifacts, [log["message"] for log in response.json()]


    run, tasks, artifacts, logs = asyncio.run(read())
    assert run.state.is_completed()
    assert {"proactbench", "model:openai/gen", "judge:openai/judge2"} <= set(run.tags)
    assert sorted(t.name.rsplit("-", 1)[0] for t in tasks) == \
        ["judgments", "phase_scores", "responses", "triggers"]
    table = next(a for a in artifacts if a["type"] == "table")
    assert table["key"] == "phase-scores-openai-gen-by-openai-judge2"
    rows = json.loads(table["data"]) if isinstance(table["data"], str) else table["data"]
    assert [r["phase"] for r in rows] == ["EMERGENT", "CRITICAL", "RECOVERY", "OVERALL"]
    assert rows[-1]["triggers"] == 6
    assert any("responses of openai/gen: 6/6 done" in message for message in logs)
    everything = json.dumps(run.parameters) + json.dumps(artifacts) + \
        "".join(logs)
    assert "PLANTED_API_KEY" in json.dumps(run.parameters)  # the variable's name, not its value
    assert secret not in everything


def test_judging_starts_while_generation_still_runs(fake, store, tmp_path):
    fake.latency = 0.02
    corpus, answerable = scaled_corpus(tmp_path, 5)  # long enough to overlap on a busy machine
    assert run_cli("run", cli_args(fake, store, eval_model="openai/synth", corpus=corpus,
                                   judge_model="openai/judge2",
                                   extra=("--concurrency", "4"))) == 0
    order = [request["model"] for request in fake.requests]
    last_generation = len(order) - 1 - order[::-1].index("synth")
    assert order.index("judge2") < last_generation
    assert fake.calls == {"synth": answerable, "judge2": answerable}


def test_run_record_counts_tokens_and_prices_known_models(fake, store, capsys):
    from replay import synthetic_model

    fake.responders["gpt-4o-mini"] = synthetic_model
    args = cli_args(fake, store, eval_model="openai/gpt-4o-mini", judge_model="openai/judge2",
                    extra=("--limit", "2"))
    assert run_cli("run", args) == 0
    printed = capsys.readouterr().out
    record = read_json(printed.split("run record: ")[1].split()[0])
    tokens = record["usage"]["model_under_test"]
    served = [r for r in fake.requests if r["model"] == "gpt-4o-mini"]
    assert tokens["prompt_tokens"] == sum(  # the fake counts words as tokens
        len(str(m["content"]).split()) for r in served for m in r["messages"])
    # litellm's bundled price of gpt-4o-mini: $0.15 per M prompt, $0.60 per M completion tokens.
    assert tokens["estimated_cost_usd"] == pytest.approx(
        tokens["prompt_tokens"] * 0.15e-6 + tokens["completion_tokens"] * 0.60e-6, rel=1e-6)
    assert record["usage"]["judge"]["estimated_cost_usd"] == "unknown"
    assert "estimated cost unknown (not in litellm's price map)" in printed


def test_samples_draw_k_responses_and_report_their_spread(fake, store, tmp_path):
    drawn = {"n": 0}

    def varied(request):  # a provider sampling at temperature > 0: each draw differs
        drawn["n"] += 1
        return Reply(content=f"Draw {drawn['n']}: a plan for the user.")

    fake.responders["sampler"] = varied
    out = tmp_path / "out"
    args = cli_args(fake, store, eval_model="openai/sampler", judge_model="openai/judge2",
                    extra=("--limit", "1", "--samples", "3", "--out", str(out)))
    assert run_cli("run", args) == 0
    triggers = 3  # the first sample dialogue has three triggers
    assert fake.calls == {"sampler": 3 * triggers, "judge2": 3 * triggers}
    per_trigger = pl.read_csv(out / "trigger_scores.csv")
    assert per_trigger.height == triggers
    assert per_trigger["samples_scored"].to_list() == [3] * triggers
    scores = pl.read_csv(out / "phase_scores.csv", null_values="-").filter(pl.col("phase") == "OVERALL")
    assert scores["triggers"][0] == 3 * triggers
    # Mean and variance per trigger, by hand from the judge's verdicts.
    judgments = pl.concat([pl.read_parquet(p) for p in (store / "artifacts" / "judgments")
                           .glob("*.parquet")])
    value = {"PASS": 1.0, "PARTIAL": 0.5, "FAIL": 0.0}
    for row in per_trigger.iter_rows(named=True):
        mine = [value[s] for s in judgments.filter(
            (pl.col("unique_id_eval") == row["unique_id_eval"]) & (pl.col("turn") == row["turn"])
        )["score"].to_list()]
        mean = sum(mine) / 3
        assert row["mean_score"] == pytest.approx(mean)
        assert row["variance"] == pytest.approx(sum((v - mean) ** 2 for v in mine) / 2)
    fake.reset_counts()
    assert run_cli("run", args) == 0
    assert sum(fake.calls.values()) == 0  # each sample index is its own cached call


def test_dry_run_prints_the_plan_with_token_and_cost_estimates(fake, store, capsys):
    from replay import synthetic_model

    fake.responders["gpt-4o-mini"] = synthetic_model
    args = cli_args(fake, store, eval_model="openai/gpt-4o-mini", judge_model="openai/judge2",
                    extra=("--limit", "2", "--dry-run"))
    assert run_cli("run", args) == 0
    printed = capsys.readouterr().out
    assert sum(fake.calls.values()) == 0
    assert "generation  openai/gpt-4o-mini: 6 calls, 0 cached, 6 to make" in printed
    generation = next(line for line in printed.splitlines() if line.startswith("  generation:"))
    prompt_tokens = int(generation.split("~")[1].split()[0].replace(",", ""))
    assert prompt_tokens > 0
    low = float(generation.split("estimated cost $")[1].split()[0])
    assert low == pytest.approx(prompt_tokens * 0.15e-6, abs=0.005)  # gpt-4o-mini prompt price
    assert "judging:    ~" in printed and "unknown (not in litellm's price map)" in printed
    # After a real run everything is cached: nothing left to estimate.
    assert run_cli("run", args[:-1]) == 0
    capsys.readouterr()
    assert run_cli("run", args) == 0
    assert "6 cached, 0 to make" in capsys.readouterr().out


def test_the_plan_warns_of_prompts_above_a_listed_context(fake, store, capsys):
    """An endpoint that names its context length in /models (vLLM's max_model_len): prompts
    estimated above it are said in the plan, before any call; a context they fit says nothing."""
    fake.model_details["gen"] = {"max_model_len": 10}
    args = cli_args(fake, store, extra=("--limit", "2", "--dry-run"))
    assert run_cli("run", args) == 0
    printed = capsys.readouterr().out
    warning = next(line for line in printed.splitlines() if "warning:" in line)
    assert "6 of 6 generation prompts to send are estimated above openai/gen's context of 10 " \
        "tokens (its endpoint's /models)" in warning
    assert "judge prompts" not in printed  # the judge's entry names no context length
    assert sum(fake.calls.values()) == 0
    fake.model_details["gen"] = {"max_model_len": 1_000_000}
    assert run_cli("run", args) == 0
    assert "warning:" not in capsys.readouterr().out
