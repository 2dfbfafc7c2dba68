"""One evaluation, one identity: the report never pools, replaces or silently ranks together
evaluations that differ in prompt, trigger set or source; recorded facts are true."""

from __future__ import annotations

import json

import polars as pl
import pytest

from helpers import cli_args, read_json, run_cli
from replay import SAMPLE_CORPUS, SAMPLE_RESULTS, read_jsonl, synthetic_judge


def report(store, out, *extra) -> pl.DataFrame:
    assert run_cli("report", ["--store", str(store), "--out", str(out), *extra]) == 0
    return pl.read_csv(out / "leaderboard.csv").filter(pl.col("phase") == "OVERALL")


def test_two_judge_prompts_are_two_evaluations(fake, store, tmp_path):
    other_prompt = tmp_path / "strict.txt"
    other_prompt.write_text("You are a strict judge. Answer with the JSON verdict only.\n")
    args = cli_args(fake, store, judge_model="openai/judge2", extra=("--limit", "3"))
    assert run_cli("run", args) == 0
    prompt_at = args.index("--judge-prompt") + 1
    args[prompt_at] = str(other_prompt)
    assert run_cli("rejudge", args) == 0
    board = report(store, tmp_path / "report")
    assert board.height == 2 and board["evaluation"].n_unique() == 2
    assert all("prompt" in label for label in board["label"].to_list())
    metrics = sorted(p.name for p in (tmp_path / "report" / "metrics").glob("*.json"))
    assert len(metrics) == 2  # they used to overwrite each other
    agreement = pl.read_csv(tmp_path / "report" / "agreement.csv").filter(
        pl.col("phase") == "OVERALL")
    assert agreement.height == 1 and agreement["n"][0] == board["evaluated"][0]
    assert agreement["percent_agreement"][0] == 1.0  # same judge, same answers: one pair


def test_a_smoke_test_beside_the_full_run_is_neither_merged_nor_ranked_with_it(fake, store,
                                                                              tmp_path):
    assert run_cli("run", cli_args(fake, store, judge_model="openai/judge2")) == 0
    assert run_cli("run", cli_args(fake, store, judge_model="openai/judge2",
                                   extra=("--limit", "2"))) == 0
    board = report(store, tmp_path / "report")
    assert board.height == 2 and board["trigger_set"].n_unique() == 2
    assert sorted(board["evaluated"].to_list())[0] < sorted(board["evaluated"].to_list())[1]
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "different trigger sets" in page
    assert any("first 2 dialogues" in line for line in page.splitlines())
    # Selecting by run gives just that one.
    records = sorted((store / "runs").glob("*.json"))
    only = read_json(records[-1])["run_id"][:8]
    assert report(store, tmp_path / "one", "--run", only).height == 1


def test_an_import_beside_a_run_of_the_same_model(fake, store, tmp_path):
    assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store), "--model", "openai/gen",
                              "--judge-model", "openai/judge"]) == 0
    assert run_cli("run", cli_args(fake, store)) == 0
    board = report(store, tmp_path / "report")
    assert sorted(board["source"].to_list()) == ["import", "run"]
    assert board["label"].n_unique() == 2
    judgments = pl.read_parquet(store / "artifacts" / "judgments" / "*.parquet")
    imported = judgments.filter(pl.col("request_key").is_null() & (pl.col("status") == "scored"))
    assert imported["judge_prompt_sha256"].unique().to_list() == ["unknown"]


def test_metrics_json_agrees_with_phase_scores_at_three_samples(fake, store, tmp_path):
    out = tmp_path / "out"
    assert run_cli("run", cli_args(fake, store, eval_model="openai/synth",
                                   judge_model="openai/judge2",
                                   extra=("--limit", "2", "--samples", "3",
                                          "--out", str(out)))) == 0
    scores = {row["phase"]: row for row in pl.read_csv(out / "phase_scores.csv", null_values="-").to_dicts()}
    metrics = read_json(out / "metrics.json")
    assert metrics["proactflow"]["samples"]["per_trigger"] == 3
    for phase, counts in metrics["aggregate_trigger_stats"].items():
        row = scores[phase]
        assert (counts["PASS"], counts["PARTIAL"], counts["FAIL"]) == \
            (row["pass"], row["partial"], row["fail"])
        assert sum(counts.values()) == row["triggers"]
        rate = metrics["metrics"][f"eval/proactivity_{phase.lower()}_weighted_score"]
        assert rate == pytest.approx(row["weighted_score"])
    overall = scores["OVERALL"]
    assert metrics["metrics"]["eval/proactivity_overall_weighted_score"] == \
        pytest.approx(overall["weighted_score"])
    results = read_jsonl(out / "results.jsonl")
    assert all(row["sample_index"] == 0 for row in results)


def test_imports_count_strangers_and_refuse_another_corpus(tmp_path, capsys):
    rows = read_jsonl(SAMPLE_RESULTS)
    stranger = json.loads(json.dumps(rows[0]))
    stranger.update(unique_id_eval="not-in-this-corpus", blueprint_id="elsewhere")
    extended = tmp_path / "extended_results.jsonl"
    extended.write_text("".join(json.dumps(r) + "\n" for r in [*rows, stranger]))
    store = tmp_path / "store"
    assert run_cli("import", [str(extended), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store)]) == 0
    assert "1 rows of the file match no dialogue of the corpus" in capsys.readouterr().out

    point = rows[1]["trigger_points"][0]
    point["evaluation_rubric"]["type"] = next(
        p for p in ("EMERGENT", "CRITICAL", "RECOVERY") if p != point["evaluation_rubric"]["type"])
    other = tmp_path / "other_results.jsonl"
    other.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert run_cli("import", [str(other), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "was this file made on another corpus?" in err and err.count("\n") == 1


def test_rejudge_all_models_plans_first_and_honours_dry_run_and_limit(fake, store, tmp_path,
                                                                       capsys):
    assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store)]) == 0
    assert run_cli("run", cli_args(fake, store, eval_model="openai/synth",
                                   judge_model="openai/judge2")) == 0
    capsys.readouterr()
    fake.reset_counts()
    fake.responders["judge3"] = synthetic_judge  # a judge new to both
    args = ["--all-models", "--judge-model", "openai/judge3", "--judge-api-base", fake.url,
            "--judge-prompt", cli_args(fake, store)[cli_args(fake, store).index(
                "--judge-prompt") + 1], "--store", str(store)]
    assert run_cli("rejudge", [*args, "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert sum(fake.calls.values()) == 0
    assert "rejudge     2 stored responses x 1 judge(s)" in plan
    assert "tiny-model (import" in plan and "openai/synth (run" in plan

    assert run_cli("rejudge", [*args, "--limit", "2", "--phases", "CRITICAL"]) == 0
    triggers = pl.read_parquet(store / "artifacts" / "triggers" / "*.parquet")
    wanted = triggers.filter((pl.col("dialogue_index") < 2) & (pl.col("phase") == "CRITICAL")
                             ).select("unique_id_eval", "turn").unique().height
    assert fake.calls["judge3"] == 2 * wanted  # both models, only those triggers
    record = read_json(sorted((store / "runs").glob("*.json"), key=lambda p: p.stat().st_mtime)
                       [-1])
    facts = record["settings"]["model_under_test"]
    assert facts["source"] in ("import", "run") and "responses" in facts
    if facts["source"] == "import":
        assert facts["generation"].startswith("unknown")
