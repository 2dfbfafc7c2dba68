"""ProactBench's nights in the history: each trigger's verdict, the weighted score over the
scored ones, resampling dialogues (the unit of the leaderboard's own intervals)."""

from __future__ import annotations

import polars as pl

from ..history_metric import mean_metric, samples_frame
from .leaderboard import OVERALL

CREDIT = {"PASS": 1.0, "PARTIAL": 0.5, "FAIL": 0.0}
"""A verdict's credit: the weighted score is (PASS + 0.5 PARTIAL) / evaluated."""
METRIC = mean_metric("weighted score", OVERALL)


def history_samples(judgments: pl.DataFrame) -> pl.DataFrame:
    rows = judgments.sort("unique_id_eval", "turn", "sample_index")
    verdict = pl.when(pl.col("status") == "scored").then(pl.col("score"))
    return samples_frame(METRIC, rows.select(
        sample=pl.concat_str("unique_id_eval", "turn", "sample_index", separator="|"),
        unit="unique_id_eval", group="phase", verdict=verdict,
        value=verdict.replace_strict(CREDIT, default=None, return_dtype=pl.Float64),
        count=pl.when(verdict.is_not_null()).then(1.0)))


def legacy_samples(samples: dict[str, list]) -> pl.DataFrame:
    """A night recorded before the suites declared their history (verdicts only) as
    history_samples makes it."""
    frame = pl.DataFrame(samples, schema={"sample": pl.String, "unit": pl.String,
                                          "group": pl.String, "verdict": pl.String})
    value = pl.col("verdict").replace_strict(CREDIT, default=None, return_dtype=pl.Float64)
    return samples_frame(METRIC, frame.with_columns(
        value=value, count=pl.when(value.is_not_null()).then(1.0)))


def view_sample(sample: str) -> str:
    """The viewer's sample showing a history sample."""
    uid, turn, _ = sample.rsplit("|", 2)
    return f"{uid}:{turn}"
