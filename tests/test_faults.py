"""Faults: interrupted runs resume, invalid judge replies never become scores, fatal provider
answers stop the run at once, and problems a user can fix are caught before any call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import polars as pl

from fake_openai import Reply
from helpers import cli_args, read_json, run_cli
from proactflow.suites.proactbench.triggers import build_triggers
from proactflow.suites.sources import read_corpus_file
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, judged_response, scaled_corpus
import warm_spawn


def request_identity(request: dict) -> str:
    return json.dumps([request["model"], request["messages"]], sort_keys=True)


def test_killed_run_resumes_without_repeating_finished_calls(fake, store, tmp_path,
                                                             prefect_server):
    fake.latency = 0.05
    concurrency = 4
    corpus, answerable = scaled_corpus(tmp_path, 5)
    synthetic = dict(eval_model="openai/synth", judge_model="openai/judge2", corpus=corpus)
    args = cli_args(fake, store, **synthetic, extra=("--concurrency", str(concurrency)))
    env = dict(os.environ, PREFECT_API_URL=prefect_server)
    process = warm_spawn.Popen([sys.executable, "-m", "proactflow.cli", "run", *args], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while fake.calls["synth"] < 20:
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    process.kill()  # SIGKILL: no cleanup of any kind
    process.wait()
    first = [request_identity(r) for r in fake.requests if r["model"] == "synth"]
    fake.reset_counts()
    fake.latency = 0

    out = tmp_path / "out"
    assert run_cli("run", [*args, "--out", str(out)]) == 0
    second = [request_identity(r) for r in fake.requests if r["model"] == "synth"]
    repeated = set(first) & set(second)
    # Only calls still in flight at the kill can be repeated.
    assert len(repeated) <= concurrency
    assert len(set(first) | set(second)) == answerable
    assert len(second) == answerable - len(first) + len(repeated)

    # The resumed run's result equals an uninterrupted run's.
    reference = tmp_path / "reference"
    assert run_cli("run", cli_args(fake, tmp_path / "fresh-store", **synthetic,
                                   extra=("--out", str(reference)))) == 0
    assert read_json(out / "metrics.json")["aggregate_trigger_stats"] == \
        read_json(reference / "metrics.json")["aggregate_trigger_stats"]
    assert (out / "results.jsonl").read_text() == (reference / "results.jsonl").read_text()


def test_ctrl_c_stops_cleanly_and_the_next_run_continues(fake, store, tmp_path,
                                                        prefect_server):
    fake.latency = 0.05
    corpus, answerable = scaled_corpus(tmp_path, 5)
    args = cli_args(fake, store, eval_model="openai/synth", judge_model="openai/judge2",
                    corpus=corpus, extra=("--concurrency", "2"))
    env = dict(os.environ, PREFECT_API_URL=prefect_server)
    process = warm_spawn.Popen([sys.executable, "-m", "proactflow.cli", "run", *args], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while fake.calls["synth"] < 10:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 130
    assert output.rstrip().splitlines()[-1].startswith("proactflow: interrupted. Finished calls "
                                                       "are cached")
    assert "Traceback" not in output
    first = fake.calls["synth"]
    fake.reset_counts()
    assert run_cli("run", args) == 0
    assert fake.calls["synth"] <= answerable - first + 2  # at most the two in flight again


def test_invalid_judge_replies_are_retried_then_recorded_as_errors(fake, store, tmp_path):
    seen: dict[str, int] = {}

    def flaky_then_good(request):
        response = judged_response(request)
        seen[response] = seen.get(response, 0) + 1
        if seen[response] == 1:
            return Reply(content='{"evaluation_result": {"status": "EVALUATED", "score": "GREAT"')
        return Reply(content=json.dumps({"evaluation_result": {
            "status": "EVALUATED", "score": "PASS", "rationale": "ok", "evidence": response[:20]}}))

    fake.responders["flaky"] = flaky_then_good
    fake.responders["broken"] = lambda request: Reply(content=json.dumps({"evaluation_result": {
        "status": "EVALUATED", "score": "EXCELLENT", "rationale": "", "evidence": ""}}))
    limit = ("--limit", "2")
    out = tmp_path / "flaky"
    assert run_cli("run", cli_args(fake, store, judge_model="openai/flaky",
                                   extra=(*limit, "--out", str(out)))) == 0
    assert fake.calls["flaky"] == 12  # 6 triggers, each answered badly once, then well
    scores = pl.read_csv(out / "phase_scores.csv", null_values="-").filter(pl.col("phase") == "OVERALL")
    assert scores["pass"][0] == 6 and scores["judge_errors"][0] == 0

    out = tmp_path / "broken"
    assert run_cli("rejudge", cli_args(fake, store, judge_model="openai/broken",
                                       extra=(*limit, "--out", str(out),
                                              "--judge-attempts", "3"))) == 1
    assert fake.calls["broken"] == 6 * 3  # three tries each, then an error row
    scores = pl.read_csv(out / "phase_scores.csv", null_values="-").filter(pl.col("phase") == "OVERALL")
    assert (scores["evaluated"][0], scores["judge_errors"][0]) == (0, 6)
    fake.reset_counts()
    # Invalid replies were kept as attempts: the next run, at the default four tries, asks
    # only the fourth of each.
    assert run_cli("rejudge", cli_args(fake, store, judge_model="openai/broken",
                                       extra=limit)) == 1
    assert fake.calls["broken"] == 6 * 1


def test_rejected_credentials_stop_the_run_at_once(fake, store, capsys):
    fake.responders["locked"] = lambda request: Reply(status=401, content="invalid api key")
    started = time.monotonic()
    assert run_cli("run", cli_args(fake, store, eval_model="openai/locked")) == 2
    assert time.monotonic() - started < 30
    assert fake.calls["locked"] <= 16  # the first wave of concurrent calls, no retries
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("proactflow: error: openai/locked: the provider rejected")


def test_dead_endpoint_stops_the_run_in_seconds(fake, store, capsys):
    fake.responders["dying"] = lambda request: Reply(status=502, content="bad gateway")
    started = time.monotonic()
    assert run_cli("run", cli_args(fake, store, eval_model="openai/dying",
                                   extra=("--retry-delay", "0.05", "--down-after", "2",
                                          "--max-attempts", "30"))) == 2
    assert time.monotonic() - started < 30
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no call succeeded for 2 s" in last and "failed attempts in a row" in last


def test_missing_key_is_reported_before_any_call(fake, store, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)  # a network is there; the key is not
    args = ["--eval-model", "openai/gen", "--eval-api-base", fake.url,
            "--judge-model", "anthropic/claude-opus-4-7", "--corpus", str(SAMPLE_CORPUS),
            "--judge-prompt", str(JUDGE_PROMPT), "--store", str(store)]
    assert run_cli("run", args) == 2
    err = capsys.readouterr().err
    assert err == ("proactflow: error: judge anthropic/claude-opus-4-7 needs ANTHROPIC_API_KEY "
                   "in the environment (or --judge-api-key-env)\n")
    assert sum(fake.calls.values()) == 0


def test_named_key_variable_must_exist(fake, store, capsys, monkeypatch):
    monkeypatch.delenv("MY_EVAL_KEY", raising=False)
    assert run_cli("run", cli_args(fake, store, extra=("--eval-api-key-env", "MY_EVAL_KEY"))) == 2
    assert "environment variable MY_EVAL_KEY is not set" in capsys.readouterr().err
    assert sum(fake.calls.values()) == 0


def test_unreachable_endpoint_is_reported_before_any_call(fake, store, capsys):
    args = cli_args(fake, store)
    args[args.index("--eval-api-base") + 1] = "http://127.0.0.1:9/v1"
    assert run_cli("run", args) == 2
    err = capsys.readouterr().err
    assert err.startswith("proactflow: error: model under test endpoint http://127.0.0.1:9/v1 "
                          "refused the connection")
    assert err.count("\n") == 1
    assert sum(fake.calls.values()) == 0


def test_planted_secret_never_reaches_store_outputs_or_logs(fake, store, tmp_path, capsys,
                                                            monkeypatch, caplog):
    secret = "sk-" + "test-PLANTED-0123456789abcdefghijklmnop"  # no key-shaped literal in git
    monkeypatch.setenv("PLANTED_API_KEY", secret)
    out = tmp_path / "out"
    args = cli_args(fake, store, extra=("--eval-api-key-env", "PLANTED_API_KEY",
                                        "--judge-api-key-env", "PLANTED_API_KEY",
                                        "--limit", "2", "--out", str(out)))
    assert run_cli("run", args) == 0
    # The key did reach the endpoint, so the test would notice a key that was never used.
    assert all(r["_authorization"] == f"Bearer {secret}" for r in fake.requests)
    captured = capsys.readouterr()
    assert secret not in captured.out + captured.err + caplog.text
    for folder in (store, out):
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def test_two_runs_at_once_on_one_store(fake, store, tmp_path, prefect_server):
    fake.latency = 0.05
    concurrency = 4
    env = dict(os.environ, PREFECT_API_URL=prefect_server)
    outs = [tmp_path / f"out{i}" for i in range(2)]
    corpus, answerable = scaled_corpus(tmp_path, 5)
    processes = [warm_spawn.Popen(
        [sys.executable, "-m", "proactflow.cli", "run",
         *cli_args(fake, store, eval_model="openai/synth", judge_model="openai/judge2",
                   corpus=corpus,
                   extra=("--concurrency", str(concurrency), "--out", str(out)))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for out in outs]
    for process in processes:
        output, _ = process.communicate(timeout=240)
        assert process.returncode == 0, output[-2000:]
    # Each call is made once: a run claims a call, looks in the cache again, and only then pays.
    assert fake.calls["synth"] == answerable
    assert fake.calls["judge2"] == answerable
    assert (outs[0] / "results.jsonl").read_text() == (outs[1] / "results.jsonl").read_text()
    for path in (store / "artifacts").rglob("*"):
        assert not path.name.endswith(".tmp"), path
        if path.suffix == ".parquet":
            assert pl.read_parquet(path).height > 0


def test_status_counts_cached_failed_and_remaining_calls(fake, store, capsys):
    fake.responders["half"] = lambda request: (
        Reply(status=503, content="overloaded") if "?" in request["messages"][-1]["content"][-40:]
        else Reply(content="an answer"))
    # Each failed call is tried --max-attempts times; a short first delay keeps the backoff's
    # jitter (about 15 s a call at the default 1 s) out of the test's time.
    args = cli_args(fake, store, eval_model="openai/half", judge_model="openai/judge2",
                    extra=("--limit", "3", "--retry-delay", "0.01"))
    rows, _ = read_corpus_file(SAMPLE_CORPUS)
    n = build_triggers(rows, limit=3).filter(pl.col("evaluable")).height
    assert run_cli("status", args) == 0
    before = capsys.readouterr().out
    assert f"generation  openai/half: {n} calls, 0 cached, {n} to make" in before
    assert "responses" in before and "not stored" in before
    assert run_cli("run", args) == 1  # some triggers lost to failed calls
    failed = len({r["messages"][-1]["content"] for r in fake.requests if r["model"] == "half"
                  and "?" in r["messages"][-1]["content"][-40:]})  # each tried several times
    capsys.readouterr()
    fake.reset_counts()
    assert run_cli("status", args) == 0
    after = capsys.readouterr().out
    assert sum(fake.calls.values()) == 0
    assert 0 < failed < n
    assert f"generation  openai/half: {n} calls, {n - failed} cached, {failed} to make" in after
    assert f"{failed} failed, incomplete" in after
