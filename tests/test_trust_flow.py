"""Whole runs against real provider behaviour: non-answers counted per phase, a changed model
seen, refresh, a failing stage stopping its sibling, exit status, keys and cost."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import polars as pl
import pytest

from fake_openai import Reply
from helpers import cli_args, read_json, run_cli
from replay import digest, scaled_corpus, synthetic_model
import warm_spawn


def overall(out) -> dict:
    return pl.read_csv(out / "phase_scores.csv", null_values="-").filter(pl.col("phase") == "OVERALL").row(
        0, named=True)


def test_replies_that_are_not_answers_are_counted_per_phase_and_never_judged(fake, store,
                                                                             tmp_path):
    kinds = [Reply(content=""), Reply(content="cut sh", finish_reason="length"),
             Reply(content="", finish_reason="content_filter")]

    def odd_model(request):
        reply = synthetic_model(request)
        pick = digest(request["messages"][-1]["content"]) % 4
        return kinds[pick] if pick < 3 else reply

    fake.responders["odd"] = odd_model
    out = tmp_path / "out"
    corpus, _ = scaled_corpus(tmp_path, 3)  # enough triggers for every kind of reply
    code = run_cli("run", cli_args(fake, store, eval_model="openai/odd", corpus=corpus,
                                   judge_model="openai/judge2", extra=("--out", str(out))))
    assert code == 0  # the model's own non-answers are results, not failures
    row = overall(out)
    responses = pl.read_parquet(store / "artifacts" / "responses" / "*.parquet")
    counts = dict(responses["status"].value_counts().iter_rows())
    assert row["empty_responses"] == counts.get("empty", 0) > 0
    assert row["truncated_responses"] == counts.get("truncated", 0) > 0
    assert row["blocked_responses"] == counts.get("blocked", 0) > 0
    assert row["evaluated"] == counts["ok"] == fake.calls["judge2"]
    assert row["not_evaluated"] == row["triggers"] - row["evaluated"]
    metrics = read_json(out / "metrics.json")
    per_phase = metrics["proactflow"]["not_evaluated"]
    assert sum(per_phase[p]["truncated_responses"] for p in per_phase if p != "OVERALL") == \
        row["truncated_responses"]
    # An identical re-run pays for nothing: the non-answers are the model's answers.
    fake.reset_counts()
    assert run_cli("run", cli_args(fake, store, eval_model="openai/odd", corpus=corpus,
                                   judge_model="openai/judge2")) == 0
    assert sum(fake.calls.values()) == 0


def test_a_redeployed_endpoint_or_a_new_revision_is_asked_again(fake, store):
    args = cli_args(fake, store, eval_model="openai/synth", judge_model="openai/judge2",
                    extra=("--limit", "2"))
    assert run_cli("run", args) == 0
    first = fake.calls["synth"]
    fake.reset_counts()
    assert run_cli("run", args) == 0 and sum(fake.calls.values()) == 0
    fake.model_details["synth"] = {"root": "/models/checkpoint-2"}  # redeployed, same name
    assert run_cli("run", args) == 0
    assert fake.calls["synth"] == first
    fake.reset_counts()
    assert run_cli("run", [*args, "--eval-revision", "2026-11-25"]) == 0
    assert fake.calls["synth"] == first and fake.calls["judge2"] == 0  # same answers: cached


def test_refresh_asks_each_stage_again(fake, store, tmp_path):
    args = cli_args(fake, store, eval_model="openai/synth", judge_model="openai/judge2",
                    extra=("--limit", "2"))
    assert run_cli("run", args) == 0
    calls = dict(fake.calls)
    fake.reset_counts()
    assert run_cli("run", [*args, "--refresh", "judgments"]) == 0
    assert fake.calls == {"judge2": calls["judge2"]}
    fake.reset_counts()
    assert run_cli("run", [*args, "--refresh", "all"]) == 0
    assert fake.calls == calls


def test_a_failing_judge_stops_generation_at_once(fake, store, tmp_path, capsys):
    fake.latency = 0.05
    fake.responders["locked"] = lambda request: Reply(status=401, content="invalid api key")
    corpus, answerable = scaled_corpus(tmp_path, 5)
    code = run_cli("run", cli_args(fake, store, eval_model="openai/synth", corpus=corpus,
                                   judge_model="openai/locked", extra=("--concurrency", "2")))
    assert code == 2
    assert "openai/locked: the provider rejected" in capsys.readouterr().err
    # Generation was cancelled with the judge's first refusal, far from every trigger.
    assert fake.calls["synth"] < answerable // 3


def test_exit_status_says_when_triggers_were_lost(fake, store, tmp_path, capsys):
    fake.responders["flaky"] = lambda request: (
        Reply(status=400, content="refused") if digest(request["messages"][-1]["content"]) % 3 == 0
        else synthetic_model(request))
    args = cli_args(fake, store, eval_model="openai/flaky", judge_model="openai/judge2",
                    extra=("--out", str(tmp_path / "out")))
    assert run_cli("run", args) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("proactflow: ") and "triggers not scored" in last
    assert "refused by the server" in last and "a re-run will not ask them again" in last
    row = overall(tmp_path / "out")
    share = row["evaluated"] / row["triggers"]
    assert run_cli("run", [*args, "--min-coverage", f"{share - 0.01:.4f}"]) == 0
    assert run_cli("run", [*args, "--min-coverage", f"{share + 0.01:.4f}"]) == 1


@pytest.mark.parametrize("flag, value", [("--timeout", "-1"), ("--rpm", "abc"),
                                         ("--tpm", "0"), ("--retry-delay", "nan"),
                                         ("--min-coverage", "1.5"), ("--concurrency", "0")])
def test_bad_numeric_flags_are_one_line_errors(fake, store, capsys, flag, value):
    with pytest.raises(SystemExit) as exit_info:
        run_cli("run", [*cli_args(fake, store), flag, value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err and sum(fake.calls.values()) == 0


def test_a_prefect_server_that_is_down_is_one_line(fake, store, tmp_path):
    env = dict(os.environ, PREFECT_API_URL="http://127.0.0.1:9/api")
    done = warm_spawn.run([sys.executable, "-m", "proactflow.cli", "run",
                           *cli_args(fake, store)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("proactflow: error: the Prefect server at "
                                  "http://127.0.0.1:9/api (PREFECT_API_URL) does not answer")
    assert done.stderr.count("\n") == 1 and sum(fake.calls.values()) == 0


def test_a_fully_cached_run_paid_nothing(fake, store, tmp_path):
    args = cli_args(fake, store, eval_model="openai/synth", judge_model="openai/judge2",
                    extra=("--limit", "2"))
    assert run_cli("run", args) == 0
    assert run_cli("run", args) == 0
    # In start order: two quick runs can start within one second, which the names do not split.
    records = sorted((read_json(path) for path in (store / "runs").glob("*.json")),
                     key=lambda record: record["started"])
    first, second = (record["usage"] for record in records)
    assert first["judge"]["paid_completion_tokens"] > 0
    for role in ("model_under_test", "judge"):
        assert second[role]["paid_prompt_tokens"] == second[role]["paid_completion_tokens"] == 0
        assert second[role]["paid_cost_usd"] == 0
        assert second[role]["completion_tokens"] == first[role]["completion_tokens"]


def test_secrets_in_a_custom_key_variable_and_the_url_stay_out_of_everything(
        fake, store, tmp_path, capsys, caplog, monkeypatch, prefect_server):
    openai_key = "sk-" + "real-openai-key-never-for-custom-endpoints-0123"
    monkeypatch.setenv("OPENAI_API_KEY", openai_key)
    credential = "opaque-credential-0451"
    monkeypatch.setenv("VLLM_CRED", credential)  # a name redaction cannot guess
    url_secret = "urlpass-7781"
    base = fake.url.replace("http://", f"http://bob:{url_secret}@") + "?tenant=t-secret-9"
    # The refused judge call echoes what it was sent: the error row must not keep it.
    fake.responders["echo"] = lambda request: Reply(
        status=400, content=f"bad auth {request['_authorization']}")
    args = cli_args(fake, store, eval_model="openai/synth", judge_model="openai/echo",
                    extra=("--eval-api-key-env", "VLLM_CRED", "--judge-api-key-env",
                           "VLLM_CRED", "--limit", "1", "--out", str(tmp_path / "out")))
    args[args.index("--eval-api-base") + 1] = base
    assert run_cli("run", args) == 1  # every judge call refused
    # User info in the model's URL goes as basic authentication, in place of the key's bearer
    # token (docs/running.md); the judge's endpoint has none, and gets the key.
    basic = "Basic " + base64.b64encode(f"bob:{url_secret}".encode()).decode()
    assert {r["_authorization"] for r in fake.requests if r["model"] == "synth"} == {basic}
    assert {r["_authorization"] for r in fake.requests if r["model"] == "echo"} == \
        {f"Bearer {credential}"}
    captured = capsys.readouterr()
    secrets = (openai_key, credential, url_secret, "t-secret-9")
    for secret in secrets:
        assert secret not in captured.out + captured.err + caplog.text
    for folder in (store, tmp_path / "out"):
        for path in folder.rglob("*"):
            if path.is_file():
                for secret in secrets:
                    assert secret.encode() not in path.read_bytes(), (secret, path)
    # Nor in the flow run's parameters as the Prefect API shows them.
    from prefect.client.orchestration import get_client

    async def parameters():
        async with get_client() as client:
            runs = await client.read_flow_runs(limit=5)
            return json.dumps([run.parameters for run in runs], default=str)

    import asyncio

    shown = asyncio.run(parameters())
    for secret in secrets:
        assert secret not in shown
