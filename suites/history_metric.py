"""What the history of nights (results/history*.py) needs of a suite: each sample's verdict on
one night, and the figure charted and compared across nights.

A suite's figure is not always a mean of per-sample scores (Proactive Agent's F1 is computed
from confusion counts), so a suite declares it as components each sample carries (a mean: the
sample's value and a count of 1; F1: one of TP, FP, TN, FN) and an expression over their sums.
Any set of samples then has its figure: a night's, a bootstrap draw's of units with
replacement, and the two nights' of one paired draw, recomputed on the same units.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

SAMPLE_COLUMNS = {"sample": pl.String, "unit": pl.String, "group": pl.String,
                  "verdict": pl.String}
"""The columns of a night's samples frame before the metric's components (Float64): `sample`
identifies a sample across nights, `unit` is the suite's own resampling unit (a ProactBench
dialogue, a Proactive Agent trace, a multimodal or video sample), `group` what scores aggregate
by (a sample in several groups has a row in each; an overall group is one more), `verdict` what
a person reads of its outcome (None: not scored, left out of figures and comparisons)."""


@dataclass(frozen=True, eq=False)
class HistoryMetric:
    """The figure (0-1) the history charts and compares for a suite."""

    name: str
    """What the page and the CSV call it, e.g. "weighted score", "F1"."""
    components: tuple[str, ...]
    """Per-sample numbers that add up over samples."""
    figure: pl.Expr
    """The figure over columns named as `components`, each a sum over the samples taken."""


def mean_metric(name: str) -> HistoryMetric:
    """A figure that is the mean of a per-sample value: sum(value) / count."""
    return HistoryMetric(name, ("value", "count"), pl.col("value") / pl.col("count"))


def samples_frame(metric: HistoryMetric, rows: pl.DataFrame, overall: str | None = None
                  ) -> pl.DataFrame:
    """`rows` (SAMPLE_COLUMNS and the metric's components) typed and ordered, with each sample
    again in the `overall` group when given."""
    schema = {**SAMPLE_COLUMNS, **{name: pl.Float64 for name in metric.components}}
    frame = rows.select(pl.col(name).cast(dtype) for name, dtype in schema.items())
    if overall is not None:
        frame = pl.concat([frame, frame.with_columns(group=pl.lit(overall))])
    return frame
