"""Proactive Agent's ProactiveBench arithmetic: upstream's formulas, reproduced to the digit."""

from __future__ import annotations

import csv

import pytest

from proactflow.suites.proactiveagent.metrics import (CATEGORIES, METRIC_COLUMNS,
                                                      CalibrationRow, Counts, calibration,
                                                      count_verdicts, split_metrics)
from replay import SHARED

RESULTS = sorted((SHARED.parent / "proactiveagent" / "eval" / "results").glob("*.csv"))


def test_a_split_by_hand():
    counts = count_verdicts([(True, True)] * 3 + [(True, False)] + [(False, True)] * 2
                            + [(False, False)] * 2)
    assert counts == Counts(3, 1, 2, 2)
    row = split_metrics("real_coding", counts)
    assert list(row) == list(METRIC_COLUMNS)
    assert row["Recall"] == pytest.approx(3 / 5)
    assert row["Precision"] == pytest.approx(3 / 4) == row["Accept Rate"]
    assert row["Accuracy"] == pytest.approx(5 / 8)
    assert row["False-Alarm"] == pytest.approx(1 / 4)
    assert row["F1-Score"] == pytest.approx(2 * 0.75 * 0.6 / 1.35)
    assert row["Total Events"] == 8


def test_an_empty_split_is_zero_not_an_error():
    row = split_metrics("real_writing", Counts())
    assert (row["Recall"], row["Precision"], row["F1-Score"], row["Total Events"]) == \
        (0, 0, 0, 0)


def solve(row: dict[str, str]) -> Counts:
    """The integer counts behind a published row (the one set that reproduces it)."""
    total = int(row["Total Events"])
    found = []
    for tp in range(total + 1):
        for fp in range(total + 1 - tp):
            if abs(tp / (tp + fp + 1e-8) - float(row["Precision"])) > 1e-9:
                continue
            for fn in range(total + 1 - tp - fp):
                if abs(tp / (tp + fn + 1e-8) - float(row["Recall"])) < 1e-9:
                    found.append(Counts(tp, fp, total - tp - fp - fn, fn))
    matching = [c for c in found if abs(split_metrics("x", c)["Accuracy"]
                                        - float(row["Accuracy"])) < 1e-9]
    assert len(matching) == 1, (row, matching)
    return matching[0]


@pytest.mark.parametrize("path", RESULTS or [None], ids=lambda p: p.stem if p else "published")
def test_every_published_results_file_is_reproduced(shared_data, path):
    rows = {row["Category"]: row for row in csv.DictReader(path.open(encoding="utf-8"))}
    counts = {}
    for category, row in rows.items():
        counts[category] = solve(row)
        mine = split_metrics(category, counts[category])
        for column in METRIC_COLUMNS[1:]:
            assert mine[column] == pytest.approx(float(row[column]), rel=1e-12, abs=1e-12), \
                (category, column)
    assert counts["real_coding"] + counts["real_writing"] == counts["real_average"]


def test_calibration_by_hand():
    mn, cr, cd, fa = ("Missed-Need (MN)", "Correct-Rejection (CR)", "Correct-Detection (CD)",
                      "False-Alarm (FA)")
    rows = [CalibrationRow(mn, False, False), CalibrationRow(mn, False, True),
            CalibrationRow(cr, True, True), CalibrationRow(cr, True, None),
            CalibrationRow(cd, True, True), CalibrationRow(cd, True, True),
            CalibrationRow(fa, False, False), CalibrationRow(fa, False, True)]
    result = calibration(rows)
    assert (result[mn], result[cr], result[cd], result[fa]) == (0.5, 0.5, 1.0, 0.5)
    assert result["agreement"] == 5 / 8
    # accepted & valid 3, accepted & not valid 2, valid but no verdict 1 (a rejection, as the
    # authors count it), rejected & not valid 2
    assert (result["true_positive"], result["false_positive"], result["false_negative"],
            result["true_negative"], result["no_verdict"]) == (3, 2, 1, 2, 1)
    assert result["accuracy"] == 5 / 8
    assert result["precision"] == 3 / 5 and result["recall"] == 3 / 4
    assert result["f1"] == 6 / 9
    assert result["examples"] == 8


def test_calibration_categories_are_the_reward_sets_own(shared_data):
    import json

    path = SHARED.parent / "proactiveagent" / "dataset" / "reward_data" / "test_data.jsonl"
    seen = {json.loads(line)["category"] for line in path.read_text(encoding="utf-8")
            .splitlines() if line}
    assert seen == set(CATEGORIES)


def test_split_scores_csv_says_dash_where_the_console_does_and_keeps_zeros():
    """Issue #36 item 7: a split with nothing scored has no rates (upstream's formula gives 0.0
    for 0/0; the stored scores keep it, upstream's metrics.csv too); split_scores.csv writes
    "-", as the console prints. A scored split's true zeros stay 0.0."""
    import polars as pl

    from proactflow.suites.proactiveagent.presentation.outputs import split_scores_csv
    from proactflow.suites.proactiveagent.scoring import score_splits

    def verdict(split: str, trace: str, status: str, proposed: bool, accepted: bool) -> dict:
        return {"model": "m", "judge": "j", "judge_prompt_sha256": "s", "splits": [split],
                "trace": trace, "status": status, "proposed": proposed, "accepted": accepted,
                "judged_candidate_task": False}

    judgments = pl.DataFrame([verdict("lost", "a", "generation_error", True, True),
                              verdict("lost", "a", "judge_error", True, True),
                              verdict("quiet", "b", "scored", False, False),
                              verdict("quiet", "b", "scored", False, True)])
    scores = score_splits(judgments)
    assert scores.filter(pl.col("split") == "lost")["f1"].to_list() == [0.0]  # stored as is
    rows = {row["split"]: row for row in csv.DictReader(
        split_scores_csv(scores).decode().splitlines())}
    for column in ("recall", "precision", "accuracy", "false_alarm", "f1", "f1_ci_low"):
        assert rows["lost"][column] == "-", column
    assert (rows["quiet"]["recall"], rows["quiet"]["precision"]) == ("0.0", "0.0")
    assert float(rows["quiet"]["accuracy"]) == pytest.approx(0.5)
