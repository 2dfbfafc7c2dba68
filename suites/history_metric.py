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
by (a sample in several groups has a row in each), `verdict` what a person reads of its outcome
(None: not scored, left out of figures and comparisons)."""


@dataclass(frozen=True, eq=False)
class HistoryMetric:
    """The figure (0-1) the history charts and compares for a suite."""

    name: str
    """What the page and the CSV call it, e.g. "weighted score", "F1"."""
    components: tuple[str, ...]
    """Per-sample numbers that add up over samples."""
    figure: pl.Expr
    """The figure over columns named as `components`, each a sum over the samples taken."""
    overall: str | None = None
    """The group every sample is in besides its own (ProactBench's OVERALL, the multimodal and
    video suites' all): added when a night is read, never stored twice."""


def mean_metric(name: str, overall: str | None = None) -> HistoryMetric:
    """A figure that is the mean of a per-sample value: sum(value) / count."""
    return HistoryMetric(name, ("value", "count"), pl.col("value") / pl.col("count"), overall)


def samples_frame(metric: HistoryMetric, rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with exactly SAMPLE_COLUMNS and the metric's components, typed, in order."""
    schema = {**SAMPLE_COLUMNS, **{name: pl.Float64 for name in metric.components}}
    return rows.select(pl.col(name).cast(dtype) for name, dtype in schema.items())


def with_overall(metric: HistoryMetric, frame: pl.DataFrame) -> pl.DataFrame:
    """A night's samples with each one again in the metric's overall group, if it has one."""
    if metric.overall is None:
        return frame
    return pl.concat([frame, frame.unique("sample", keep="first", maintain_order=True)
                      .with_columns(group=pl.lit(metric.overall))])
