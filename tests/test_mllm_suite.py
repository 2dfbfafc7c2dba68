"""`--suite proactivebench-mllm` end to end through the CLI against the fake server, on a corpus
and a wheel generated here (no download): each step's request carries the image the
environment shows (the fake decodes its pixels), every sample ends as the environment says, a
second run makes no call, a run killed mid-episode resumes without paying twice; OEG with a fake judge gives a table computed by hand; bad flags are
one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from fake_openai import FakeOpenAI, Reply
from helpers import killed_mid_run, request_identity, run_cli
from mllm_suite_helpers import decoded, expected_mcqa, make_corpus, seeing_model

from proactflow.common.errors import UserError

IDS = range(8)


def test_mcqa_steps_carry_the_images_the_environment_shows(tmp_path, capsys):
    corpus, wheel = make_corpus(tmp_path)
    expected = expected_mcqa(corpus, IDS)
    wrong: list[str] = []
    with FakeOpenAI({"seer": seeing_model(expected, wrong)}) as fake:
        args = ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus", str(corpus), "--package",
                str(wheel), "--eval-model", "openai/seer", "--eval-api-base", fake.url,
                "--store", str(tmp_path / "store")]
        out = tmp_path / "out"
        code = run_cli("run", [*args, "--out", str(out)])
        assert wrong == []  # every request showed the right pixels
        # A view shown again with the same text (ROD wraps around) is one call: the cache's.
        assert fake.calls["seer"] == len(expected.replies) < expected.calls
        body = fake.requests[0]
        assert body["max_tokens"] == 50 and "temperature" not in body and "top_p" not in body
        samples = pl.read_csv(out / "samples.csv")
        got = {(r["dataset"], r["sample_id"]): {k: r[k] for k in
                                                ("correct_prediction", "num_turns",
                                                 "stop_reason")}
               for r in samples.iter_rows(named=True)}
        assert got == expected.episodes
        reasons = {e["stop_reason"] for e in expected.episodes.values()}
        assert {"correct", "wrong", "unreadable", "environment_crash"} <= reasons
        assert code == (1 if "environment_crash" in reasons else 0)  # crashes are not scored
        steps = pl.read_csv(out / "steps.csv")
        assert steps.height == expected.calls + sum(
            e["stop_reason"] == "image_error" for e in expected.episodes.values())
        assert steps["image_sha256"].drop_nulls().len() == expected.calls
        metrics = pl.read_csv(out / "metrics.csv", null_values="-")
        assert metrics.columns[:4] == ["dataset", "samples", "acc", "ps"]
        assert set(metrics["variant"]) == {"mcqa"} and "cp" not in metrics.columns
        for row in metrics.iter_rows(named=True):
            ended = [e for (d, _), e in expected.episodes.items()
                     if row["dataset"] in (d, "all") and e["stop_reason"] != "environment_crash"]
            assert row["scored"] == len(ended)
            assert row["acc"] == pytest.approx(
                100 * sum(bool(e["correct_prediction"]) for e in ended) / len(ended))
            assert row["ps"] == pytest.approx(sum(e["num_turns"] - 1 for e in ended)
                                              / len(ended))
        assert json.loads((out / "metrics.json").read_text())["metrics"][0]["dataset"] == "ROD"
        # Images travel as data URLs only: the store keeps their hashes.
        for path in (tmp_path / "store").rglob("*"):
            if path.is_file():
                assert b"base64," not in path.read_bytes(), path

        fake.reset_counts()
        assert run_cli("run", args) == code
        assert fake.calls["seer"] == 0


@pytest.mark.parametrize("variant", ["--hint", "--reference"])
def test_the_hint_and_reference_variants(tmp_path, variant, capsys):
    corpus, wheel = make_corpus(tmp_path, per_dataset=3)
    expected = expected_mcqa(corpus, range(3), hint=variant == "--hint",
                             reference=variant == "--reference")
    wrong: list[str] = []
    with FakeOpenAI({"seer": seeing_model(expected, wrong)}) as fake:
        out = tmp_path / "out"
        run_cli("run", ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus", str(corpus),
                        "--package", str(wheel), variant, "--eval-model", "openai/seer",
                        "--eval-api-base", fake.url, "--store", str(tmp_path / "store"),
                        "--out", str(out)])
        assert wrong == [] and fake.calls["seer"] == len(expected.replies)
    # The variant is named in the console's title and in metrics.csv.
    name = "mcqa " + variant[2:]
    title = f"ProactiveBench (multimodal), {name.upper()}: openai/seer judged by rules"
    assert title in " ".join(capsys.readouterr().out.split())  # rich wraps a long title
    assert set(pl.read_csv(out / "metrics.csv", null_values="-")["variant"]) == {name}
    samples = pl.read_csv(out / "samples.csv")
    assert {(r["dataset"], r["sample_id"]): r["num_turns"] for r in samples.iter_rows(
        named=True)} == {key: e["num_turns"] for key, e in expected.episodes.items()}
    if variant == "--reference":  # one step, categories only
        assert set(samples["num_turns"].drop_nulls()) == {1}
    else:
        assert all("Hint:" in prompt for prompt, _ in expected.replies)


def test_a_failed_call_is_an_error_row_never_a_wrong_answer(tmp_path):
    corpus, wheel = make_corpus(tmp_path, per_dataset=2)

    def flaky(request: dict) -> Reply:
        return Reply(status=500, content="down") if "Rotate" in decoded(request)[0] else \
            Reply(content="Z")
    with FakeOpenAI({"seer": flaky}) as fake:
        out = tmp_path / "out"
        code = run_cli("run", ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus", str(corpus),
                               "--package", str(wheel), "--datasets", "MVP-N,ROD",
                               "--eval-model", "openai/seer", "--eval-api-base", fake.url,
                               "--max-attempts", "1", "--store", str(tmp_path / "store"),
                               "--out", str(out)])
    assert code == 1
    metrics = {r["dataset"]: r for r in pl.read_csv(out / "metrics.csv", null_values="-").iter_rows(named=True)}
    assert metrics["MVP-N"]["generation_errors"] == 2 and metrics["MVP-N"]["scored"] == 0
    assert metrics["MVP-N"]["acc"] is None
    assert (metrics["ROD"]["scored"], metrics["ROD"]["acc"]) == (2, 0.0)  # "Z": unreadable


def oeg_judge(request: dict) -> Reply:
    user = request["messages"][-1]["content"]
    if "'Move the blocks', 'Move the camera'" in user:  # ROD: a decoy list inside thinking
        return Reply(content="<think>1, 1, 1</think>\n1, 0")
    if "'Add more details to the drawing'" in user:  # QD
        return Reply(content="0,1")
    return Reply(content="</think>1")  # CIT: one verdict for three or more answers


def test_oeg_scores_by_hand(tmp_path):
    corpus, wheel = make_corpus(tmp_path)
    with FakeOpenAI({"seer": lambda r: Reply(content="Please move the object."),
                     "judge": oeg_judge}) as fake:
        out = tmp_path / "out"
        code = run_cli("run", ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus", str(corpus),
                               "--package", str(wheel), "--datasets", "ROD,QuickDraw,CIT",
                               "--mode", "oeg", "--eval-model", "openai/seer",
                               "--eval-api-base", fake.url, "--judge-model", "openai/judge",
                               "--judge-api-base", fake.url, "--store", str(tmp_path / "s"),
                               "--out", str(out)])
        assert code == 1  # CIT's judge errors are lost coverage
        assert fake.calls["seer"] == 24  # every sample's own image
        # The judge sees no image: samples of a dataset with the same question, answers and
        # reply are one judge call, the cache's; CIT's list of the wrong length is asked again
        # as the judge's attempts (4) say, and never cached.
        judged = [request_identity(r) for r in fake.requests if r["model"] == "judge"]
        cit = [r for r in judged if "'Add more details" not in r and "'Move the blocks'" not in r]
        assert len(judged) - len(cit) < 16 and len(cit) >= 4 and len(cit) % 4 == 0
        assert fake.requests[0]["max_tokens"] == 2 ** 15
    metrics = pl.read_csv(out / "metrics.csv", null_values="-")
    assert metrics.columns[:5] == ["dataset", "samples", "ps", "cp", "agg"]
    assert set(metrics["variant"]) == {"oeg"} and "acc" not in metrics.columns
    table = {r["dataset"]: (r["samples"], r["scored"], r["ps"], r["cp"], r["agg"],
                            r["judge_errors"], r["upstream_ps"], r["upstream_agg"])
             for r in metrics.iter_rows(named=True)}
    assert table == {
        "ROD": (8, 8, 100.0, 0.0, 100.0, 0, 100.0, 100.0),
        "QD": (8, 8, 0.0, 100.0, 100.0, 0, 0.0, 100.0),
        "CIT": (8, 0, None, None, None, 8, 0.0, 0.0),  # the package scores these zeros
        "all": (24, 16, 50.0, 50.0, 100.0, 8, 100 / 3, 200 / 3)}
    samples = pl.read_csv(out / "samples.csv")
    assert set(samples.filter(pl.col("dataset") == "CIT")["status"]) == {"judge_error"}


def test_a_truncated_image_at_a_later_step_stops_the_run_before_any_call(tmp_path, capsys):
    corpus, wheel = make_corpus(tmp_path)
    later = sorted((corpus / "ROD").glob("obj*/img_3.png"))[0]  # never a first view
    later.write_bytes(later.read_bytes()[:len(later.read_bytes()) // 2])
    with FakeOpenAI({"seer": lambda r: Reply(content="A")}) as fake:
        code = run_cli("run", ["--suite", "proactivebench-mllm", "--eval-vision",
                               "--corpus", str(corpus), "--package", str(wheel),
                               "--datasets", "ROD", "--eval-model", "openai/seer",
                               "--eval-api-base", fake.url, "--store", str(tmp_path / "s")])
        assert fake.calls["seer"] == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and str(later) in err[0] and "truncated" in err[0]


def test_oeg_judge_lists_of_the_wrong_length_are_asked_again_within_the_run(tmp_path, capsys):
    corpus, wheel = make_corpus(tmp_path)
    seen: dict[str, int] = {}

    def second_time_right(request: dict) -> Reply:
        user = request["messages"][-1]["content"]
        seen[user] = seen.get(user, 0) + 1
        return Reply(content="0,1" if seen[user] > 1 else "1")  # QD has two answers

    common = ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus", str(corpus),
              "--package", str(wheel), "--datasets", "QuickDraw", "--mode", "oeg",
              "--eval-model", "openai/seer"]
    with FakeOpenAI({"seer": lambda r: Reply(content="Please move the object."),
                     "judge": second_time_right,
                     "wrong": lambda r: Reply(content="1")}) as fake:
        args = [*common, "--eval-api-base", fake.url, "--judge-api-base", fake.url]
        assert run_cli("run", [*args, "--judge-model", "openai/judge",
                               "--store", str(tmp_path / "s1"), "--out",
                               str(tmp_path / "out")]) == 0
        assert seen and set(seen.values()) == {2}  # each asked again once, within the run
        metrics = pl.read_csv(tmp_path / "out" / "metrics.csv", null_values="-").filter(
            pl.col("dataset") == "QD").row(0, named=True)
        assert (metrics["scored"], metrics["judge_errors"]) == (8, 0)
        # A judge that never gives the right length: asked as --judge-attempts says, then a
        # judge_error; its replies are kept as attempts, which the next run reads (the last
        # line says how to ask again, truthfully).
        fake.reset_counts()
        store = tmp_path / "s2"
        capsys.readouterr()
        assert run_cli("run", [*args, "--judge-model", "openai/wrong", "--judge-attempts",
                               "3", "--store", str(store)]) == 1
        asked = [request_identity(r) for r in fake.requests if r["model"] == "wrong"]
        # Three tries for each judge request of QD's 8 samples; two samples whose judge request
        # is the same one pay for it once (the second reads the attempts the first kept).
        assert len(asked) == 3 * len(set(asked)) == 3 * 7
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert "nothing scored" in last and "--judge-attempts" in last
        fake.reset_counts()
        assert run_cli("run", [*args, "--judge-model", "openai/wrong", "--judge-attempts",
                               "3", "--store", str(store)]) == 1
        assert fake.calls["wrong"] == 0  # every attempt read from the store
        assert run_cli("run", [*args, "--judge-model", "openai/wrong", "--judge-attempts",
                               "4", "--store", str(store)]) == 1
        assert fake.calls["wrong"] == len(set(asked))  # one more try each, as the line said


@pytest.mark.parametrize("flags, message", [
    (["--mode", "oeg"], "--mode oeg needs --judge-model"),
    (["--datasets", "ROD,FOO"], "--datasets: unknown 'FOO'"),
    (["--judge-model", "openai/j", "--judge-api-base", "http://127.0.0.1:9/v1"],
     "--judge-model is for --mode oeg"),
    # An option check comes before the network check its judge would need (offline here).
    (["--judge-model", "gpt-4o-mini"], "--judge-model is for --mode oeg"),
    (["--mode", "oeg", "--reference", "--judge-model", "openai/j", "--judge-api-base",
      "http://127.0.0.1:9/v1"], "--reference is an MCQA"),
])
def test_bad_flags_are_one_line_errors(tmp_path, capsys, flags, message):
    corpus, wheel = make_corpus(tmp_path, per_dataset=1)
    code = run_cli("run", ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus", str(corpus),
                           "--package", str(wheel), "--eval-model", "openai/m",
                           "--eval-api-base", "http://127.0.0.1:9/v1",
                           "--store", str(tmp_path / "s"), *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err


def test_a_flag_of_this_suite_on_another_is_refused(tmp_path, capsys):
    local = "http://127.0.0.1:9/v1"
    code = run_cli("run", ["--suite", "proactiveagent", "--eval-model", "openai/m",
                           "--eval-api-base", local, "--judge-model", "openai/j",
                           "--judge-api-base", local, "--hint", "--datasets", "ROD",
                           "--store", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.endswith(
        "--datasets, --hint: not an option of the proactiveagent suite"), err


RUNNER = """
import sys
sys.path.insert(0, {tests!r})
from mllm_suite_helpers import register
from pathlib import Path
from proactflow.cli import main
register(Path({wheel!r}))
sys.exit(main(sys.argv[1:]))
"""


def test_a_run_killed_mid_episode_resumes_without_paying_twice(tmp_path, prefect_server):
    corpus, wheel = make_corpus(tmp_path)
    expected = expected_mcqa(corpus, IDS)
    wrong: list[str] = []
    concurrency = 4

    identity = request_identity
    with FakeOpenAI({"seer": seeing_model(expected, wrong)}) as fake:
        args = ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus", str(corpus), "--package",
                str(wheel), "--eval-model", "openai/seer", "--eval-api-base", fake.url,
                "--concurrency", str(concurrency)]
        reference = tmp_path / "reference"
        run_cli("run", [*args, "--store", str(tmp_path / "fresh"), "--out", str(reference)])
        needed = {identity(r) for r in fake.requests if r["model"] == "seer"}
        fake.reset_counts()
        fake.latency = 0.05

        args += ["--store", str(tmp_path / "store")]
        runner = RUNNER.format(tests=str(Path(__file__).resolve().parent), wheel=str(wheel))
        first = killed_mid_run(fake, "seer", runner, args, prefect_server, len(needed) // 2)
        fake.latency = 0

        out = tmp_path / "out"
        run_cli("run", [*args, "--out", str(out)])
        second = [identity(r) for r in fake.requests if r["model"] == "seer"]
    assert wrong == []
    repeated = set(first) & set(second)
    assert len(repeated) <= concurrency  # only calls in flight at the kill are asked again
    assert len(second) == len(set(second))  # and nothing twice within the resumed run
    assert set(first) | set(second) == needed
    assert any(step > 0 for step in pl.read_csv(out / "steps.csv")["step"])
    assert pl.read_csv(out / "steps.csv").equals(pl.read_csv(reference / "steps.csv"))
    assert pl.read_csv(out / "samples.csv").equals(pl.read_csv(reference / "samples.csv"))


def test_offline_the_corpus_and_the_wheel_are_named_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    corpus, wheel = make_corpus(tmp_path, per_dataset=1)
    common = ["--suite", "proactivebench-mllm", "--eval-vision", "--eval-model", "openai/m",
              "--eval-api-base", "http://127.0.0.1:9/v1", "--store", str(tmp_path / "s")]
    assert run_cli("run", [*common, "--package", str(wheel)]) == 2
    err = capsys.readouterr().err.strip()
    assert "give --corpus DIR" in err and len(err.splitlines()) == 1, err

    monkeypatch.setattr("proactflow.suites.proactivebench_mllm.upstream._pip_download",
                        lambda folder: (_ for _ in ()).throw(
                            UserError("cannot download proactivebench==0.1.1 with pip (no "
                                      "network)")))
    assert run_cli("run", [*common, "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--package FILE" in err and len(err.splitlines()) == 1, err


def test_a_sweep_names_the_suite_and_its_options(tmp_path, capsys, prefect_server):
    corpus, wheel = make_corpus(tmp_path, per_dataset=4)
    with FakeOpenAI({"first": lambda r: Reply(content="A"),
                     "second": lambda r: Reply(content="(A)")}) as fake:
        out = tmp_path / "nightly"
        config = tmp_path / "sweep.toml"
        config.write_text(f"""
suite = "proactivebench-mllm"
store = "{tmp_path / 'store'}"
out = "{out}"
corpus = "{corpus}"
processes = 1
min_coverage = 0.5                    # IN-C entry 1 crashes the package: not scored

[options]
datasets = "ROD,IN-C"
package = "{wheel}"

[[models]]
model = "openai/first"
api_base = "{fake.url}"
vision = true

[[models]]
model = "openai/second"
api_base = "{fake.url}"
vision = true
""")
        assert run_cli("sweep", ["--config", str(config)]) == 0
    board = pl.read_csv(out / "leaderboard.csv")
    pooled = {r["model"]: r for r in board.filter(pl.col("dataset") == "all").iter_rows(
        named=True)}
    assert set(pooled) == {"openai/first", "openai/second"}
    assert pooled["openai/second"]["acc"] == 0.0  # "(A)" is unreadable: every episode ends
    assert set(board["dataset"]) == {"ROD", "IN-C", "all"}
    summary = (out / "sweep.md").read_text()
    assert "openai/first" in summary and "openai/second" in summary
    assert (out / "openai_first__rules__mcqa" / "metrics.csv").exists()
    assert "ProactiveBench (multimodal)" in (out / "report.html").read_text()
    # `proactflow report` has the suite's section, one row per evaluation and dataset.
    assert run_cli("report", ["--store", str(tmp_path / "store"),
                              "--out", str(tmp_path / "report")]) == 0
    assert "ProactiveBench (multimodal)" in (tmp_path / "report" / "report.html").read_text()
    section = pl.read_csv(tmp_path / "report" / "proactivebench_mllm_leaderboard.csv")
    assert section.filter(pl.col("dataset") == "all").height == 2


def test_refused_requests_have_a_column_in_the_console_table_and_metrics_csv(tmp_path, capsys):
    """Issue #36 item 7: metrics.json counted them; the table and metrics.csv did not."""
    corpus, wheel = make_corpus(tmp_path)
    too_long = "This model's maximum context length is 512 tokens"
    with FakeOpenAI({"seer": lambda r: Reply(status=400, content=too_long)}) as fake:
        out = tmp_path / "out"
        assert run_cli("run", ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus",
                               str(corpus), "--package", str(wheel), "--datasets", "QuickDraw",
                               "--eval-model", "openai/seer", "--eval-api-base", fake.url,
                               "--store", str(tmp_path / "store"), "--out", str(out)]) == 1
    printed = capsys.readouterr()
    header = next(line for line in printed.out.splitlines()
                  if line.startswith("┃") and "dataset" in line)
    assert header.split("┃")[-2].strip() == "refused"
    metrics = pl.read_csv(out / "metrics.csv", null_values="-")
    row = metrics.filter(pl.col("dataset") == "QD").row(0, named=True)
    assert row["refused"] == row["samples"] == 8 and row["scored"] == 0
    assert open(out / "metrics.csv", encoding="utf-8").read().count(",-,") >= 1  # no acc: "-"
    last = printed.err.strip().splitlines()[-1]
    assert "8 refused by the server" in last and too_long in last
