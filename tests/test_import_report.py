"""Published results imported into the store and reported: numbers equal the published labels,
the arithmetic equals upstream's metrics files, and intervals are reproducible."""

from __future__ import annotations

import json
from collections import Counter

import polars as pl
import pytest

from helpers import read_json, run_cli
from proactflow.suites.proactbench.exports import metric_values
from proactflow.suites.proactbench.leaderboard import bootstrap_interval, build_leaderboard
from replay import (ANSWERABLE, SAMPLE_CORPUS, SAMPLE_RESULTS, SHARED, SHARED_CORPUS,
                    SHARED_RESULTS, TRIGGERS, read_jsonl)

PUBLISHED_METRICS = sorted((SHARED / "published_metrics").glob("*.json"))
EXTRA_CORPUS = SHARED / "extra_dialogues.jsonl"
QWEN_RESULTS = SHARED / "extra_Qwen3-1.7B_results.jsonl"


def label_counts(path) -> dict[str, Counter]:
    counts: dict[str, Counter] = {}
    for row in read_jsonl(path):
        for point in row["trigger_points"]:
            counts.setdefault(point["evaluation_rubric"]["type"], Counter())[
                point["evaluation_result"]["score"]] += 1
    return counts


def corpus_counts(path) -> Counter:
    return Counter(point["evaluation_rubric"]["type"] for row in read_jsonl(path)
                   for point in row["trigger_points"])


@pytest.fixture(params=["project", "shared"])
def labelled(request):
    """(corpus, results file, model name): the tests' own hand-labelled files always, and the
    benchmark's sample with gpt-5.5's published labels where it is."""
    if request.param == "project":
        return SAMPLE_CORPUS, SAMPLE_RESULTS, "tiny-model"
    request.getfixturevalue("shared_data")
    return SHARED_CORPUS, SHARED_RESULTS, "gpt-5.5"


def test_import_and_report_reproduce_the_published_labels(labelled, tmp_path, capsys):
    corpus, results, model = labelled
    store, out = tmp_path / "store", tmp_path / "report"
    assert run_cli("import", [str(results), "--corpus", str(corpus),
                              "--store", str(store)]) == 0
    assert run_cli("report", ["--store", str(store), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    expected = label_counts(results)
    labelled_total = sum(sum(c.values()) for c in expected.values())
    total = sum(corpus_counts(corpus).values())
    assert f"{model} judged by gpt-5.4: scored {labelled_total} of {total} triggers" in printed

    board = pl.read_csv(out / "leaderboard.csv")
    assert board.columns == ["model", "judge", "phase", "evaluated", "pass", "partial", "fail",
                             "not_evaluated", "pass_rate", "weighted_score", "ci_low", "ci_high",
                             "evaluation", "label", "trigger_set", "source"]
    in_corpus = corpus_counts(corpus)
    for phase, counts in expected.items():
        row = board.filter(pl.col("phase") == phase).row(0, named=True)
        assert (row["pass"], row["partial"], row["fail"], row["not_evaluated"]) == \
            (counts["PASS"], counts["PARTIAL"], counts["FAIL"],
             in_corpus[phase] - sum(counts.values()))  # a trigger without a user message
        assert row["weighted_score"] == pytest.approx(
            (counts["PASS"] + 0.5 * counts["PARTIAL"]) / sum(counts.values()))
        assert row["ci_low"] <= row["weighted_score"] <= row["ci_high"]

    metrics = read_json(out / "metrics" / f"{model}__gpt-5.4.json")
    for phase, counts in expected.items():
        stats = metrics["aggregate_trigger_stats"][phase]
        assert (stats["PASS"], stats["PARTIAL"], stats["FAIL"]) == \
            (counts["PASS"], counts["PARTIAL"], counts["FAIL"])
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<svg" in page and model in page and "seed 0" in page


def test_import_matches_non_uniform_rows_and_names_the_model(shared_data, tmp_path, capsys):
    store = tmp_path / "store"
    assert run_cli("import", [str(QWEN_RESULTS), "--corpus", str(EXTRA_CORPUS),
                              "--store", str(store)]) == 0
    assert "Qwen3-1.7B judged by gpt-5.4: 35 of 35 corpus triggers scored" in \
        capsys.readouterr().out
    judgments = pl.concat([pl.read_parquet(p) for p in
                           (store / "artifacts" / "judgments").glob("*.parquet")])
    assert judgments["model"].unique().to_list() == ["Qwen3-1.7B"]
    assert Counter(judgments["score"].to_list()) == \
        sum(label_counts(QWEN_RESULTS).values(), Counter())


def test_triggers_missing_from_a_file_are_counted_not_dropped(tmp_path, capsys):
    rows = read_jsonl(SAMPLE_RESULTS)
    dropped = rows[0]["trigger_points"].pop(1)  # upstream lost this generation
    partial = tmp_path / "partial_results.jsonl"
    partial.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    store, out = tmp_path / "store", tmp_path / "report"
    assert run_cli("import", [str(partial), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store)]) == 0
    assert run_cli("report", ["--store", str(store), "--out", str(out)]) == 0
    assert f"scored {ANSWERABLE - 1} of {TRIGGERS} triggers (not evaluated: generation_error " \
        "1, unevaluable 1)" in capsys.readouterr().out
    phase = dropped["evaluation_rubric"]["type"]
    metrics = read_json(out / "metrics" / "tiny-model__gpt-5.4.json")
    assert metrics["aggregate_trigger_stats"][phase]["SKIPPED"] == 1
    assert metrics["proactflow"]["not_evaluated"][phase]["generation_errors"] == 1


@pytest.mark.parametrize("path", PUBLISHED_METRICS or [None],
                         ids=lambda p: p.stem if p else "published")
def test_metrics_arithmetic_equals_a_published_metrics_file(shared_data, path):
    published = json.loads(path.read_text())
    mine = {"metrics": metric_values(published["aggregate_trigger_stats"], dialogues=1)}
    for key, value in published["metrics"].items():
        if key == "eval/proactivity_total_dialogues":
            continue  # one synthetic row here stands for all dialogues
        assert mine["metrics"][key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_bootstrap_is_reproducible_and_sane():
    dialogues = [(1.0, 2), (0.5, 1), (0.0, 3), (2.5, 3), (1.0, 1)]
    first = bootstrap_interval(dialogues, samples=500, seed=7)
    assert first == bootstrap_interval(dialogues, samples=500, seed=7)
    assert first != bootstrap_interval(dialogues, samples=500, seed=8)
    point = sum(c for c, _ in dialogues) / sum(e for _, e in dialogues)
    assert first[0] < point < first[1]
    assert bootstrap_interval([(1.0, 2)] * 4, samples=50, seed=0) == (0.5, 0.5)
    assert bootstrap_interval([(0.0, 0)], samples=50, seed=0) == (None, None)


def test_leaderboard_resamples_dialogues_not_triggers():
    def rows(uid, scores):
        return [{"model": "m", "judge": "j", "phase": "EMERGENT", "unique_id_eval": uid,
                 "status": "scored", "score": s} for s in scores]

    # Two dialogues: one all PASS, one all FAIL, many triggers each. Resampling triggers would
    # give a narrow interval around 0.5; resampling dialogues gives draws of 0, 0.5 or 1.
    frame = pl.DataFrame(rows("a", ["PASS"] * 50) + rows("b", ["FAIL"] * 50))
    board = build_leaderboard(frame, samples=400, seed=1)
    emergent = board.filter(pl.col("phase") == "EMERGENT").row(0, named=True)
    assert emergent["weighted_score"] == 0.5
    assert (emergent["ci_low"], emergent["ci_high"]) == (0.0, 1.0)


def test_report_includes_agreement_when_a_model_has_two_judges(tmp_path):
    store, out = tmp_path / "store", tmp_path / "report"
    for judge in ("gpt-5.4", "gpt-5.4-rerun"):
        assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                                  "--store", str(store), "--judge-model", judge]) == 0
    assert run_cli("report", ["--store", str(store), "--out", str(out)]) == 0
    agreement = pl.read_csv(out / "agreement.csv").filter(pl.col("phase") == "OVERALL")
    row = agreement.row(0, named=True)
    assert (row["judge_a"], row["judge_b"], row["n"]) == ("gpt-5.4", "gpt-5.4-rerun", ANSWERABLE)
    assert row["percent_agreement"] == 1.0 and row["kappa"] == pytest.approx(1.0)
    passes = sum(c["PASS"] for c in label_counts(SAMPLE_RESULTS).values())
    assert json.loads(row["confusion"])[2][2] == passes  # PASS by both, on the diagonal
    assert "Judge agreement" in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("tracked", [True, False], ids=["prefect", "no-prefect-server"])
def test_imported_results_are_rejudged_without_generation(fake, tmp_path, capsys,
                                                          prefect_server, monkeypatch, tracked):
    if not tracked:  # as without PREFECT_API_URL: the stages run without Prefect
        monkeypatch.setattr("proactflow.cli.running.reports_to_prefect", lambda: False)
    store, out = tmp_path / "store", tmp_path / "judges"
    assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store)]) == 0
    from replay import JUDGE_PROMPT

    # openai/judge replays the file's labels; openai/judge2 is a different judge.
    assert run_cli("rejudge", ["--all-models", "--judges", "openai/judge,openai/judge2",
                               "--judge-api-base", fake.url, "--judge-prompt", str(JUDGE_PROMPT),
                               "--store", str(store), "--out", str(out)]) == 0
    assert fake.calls == {"judge": ANSWERABLE, "judge2": ANSWERABLE}
    assert run_cli("report", ["--store", str(store), "--out", str(tmp_path / "report")]) == 0
    agreement = pl.read_csv(tmp_path / "report" / "agreement.csv").filter(
        (pl.col("phase") == "OVERALL") & (pl.col("judge_a") == "gpt-5.4")
        & (pl.col("judge_b") == "openai/judge"))
    # Replaying the published labels agrees with the imported ones everywhere.
    assert agreement.row(0, named=True)["percent_agreement"] == 1.0
    metrics = read_json(out / "tiny-model__openai_judge" / "metrics.json")
    expected = label_counts(SAMPLE_RESULTS)
    assert {p: metrics["aggregate_trigger_stats"][p]["PASS"] for p in expected} == \
        {p: c["PASS"] for p, c in expected.items()}


def test_rank_ranges_show_ties_where_intervals_overlap():
    from proactflow.suites.proactbench.leaderboard import with_rank_ranges

    board = pl.DataFrame({
        "phase": ["OVERALL"] * 4,
        "ci_low": [0.70, 0.60, 0.20, None], "ci_high": [0.90, 0.75, 0.40, None]})
    # A [.70,.90] overlaps B [.60,.75]; both are surely above C [.20,.40]; D has no interval.
    assert with_rank_ranges(board)["rank"].to_list() == ["1-2", "1-2", "3", "-"]


def test_report_html_is_well_formed(tmp_path):
    from html.parser import HTMLParser

    store, out = tmp_path / "store", tmp_path / "report"
    assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store)]) == 0
    assert run_cli("report", ["--store", str(store), "--out", str(out)]) == 0

    class Checker(HTMLParser):
        void = {"meta", "br", "img", "input", "hr", "link"}

        def __init__(self):
            super().__init__()
            self.stack, self.rects, self.errors = [], 0, []

        def handle_starttag(self, tag, attrs):
            if tag not in self.void:
                self.stack.append(tag)
            self.rects += tag == "rect"

        def handle_endtag(self, tag):
            if not self.stack or self.stack.pop() != tag:
                self.errors.append(tag)

    checker = Checker()
    checker.feed((out / "report.html").read_text(encoding="utf-8"))
    assert checker.errors == [] and checker.stack == []
    assert checker.rects == 4  # one bar per phase and overall for the one (model, judge)
    assert "<script" not in (out / "report.html").read_text(encoding="utf-8")  # text escaped
