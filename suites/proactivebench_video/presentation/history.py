"""The video ProactiveBench's nights in the history: each gold turn's PAUC at omega 0.5 (the
console's headline) and its final in-window score, the turn-weighted mean over scored turns,
resampling samples (a sample's turns share one chat: the unit of the part scores' intervals)."""

from __future__ import annotations

import polars as pl

from ...history_metric import mean_metric, samples_frame
from ..pauc import omega_column
from ..scoring import ALL_PARTS

METRIC = mean_metric("PAUC at omega 0.5", ALL_PARTS)


def history_samples(judgments: pl.DataFrame) -> pl.DataFrame:
    turns = judgments.sort("part", "question_id", "sample_index", "turn")
    scored = pl.col("status") == "scored"
    pauc = pl.col(omega_column(0.5))
    unit = pl.concat_str("part", "question_id", "sample_index", separator="|")
    return samples_frame(METRIC, turns.select(
        pl.concat_str(unit, "turn", separator="|").alias("sample"), unit.alias("unit"),
        pl.col("part").alias("group"),
        pl.when(scored).then(pl.format("PAUC {} (final score {})", pauc.round(3),
                                       pl.col("final_score").fill_null("-"))).alias("verdict"),
        pl.when(scored).then(pauc).alias("value"),
        pl.when(scored).then(1.0).alias("count")))


def view_sample(sample: str) -> str:
    """The viewer's sample showing a history sample."""
    part, question_id = sample.split("|")[:2]  # the viewer shows every turn of a sample
    return f"{part}:{question_id}"
