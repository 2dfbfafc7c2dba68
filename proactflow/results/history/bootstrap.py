"""The history's intervals: a suite's figure (suites/history_metric.py) recomputed on units drawn
with replacement, for one night and paired across two.

A draw takes as many units as there are, with replacement, and sums each component over the
units drawn; the figure is then computed on those sums, so a figure that is not a mean of
per-sample scores (F1) is bootstrapped as it is defined. Paired: both nights' components are
summed on the same draw and the difference of their figures taken, so what the two nights share
(which units happen to be in the corpus) cancels. All replicates are drawn at once by polars,
seeded, from units in name order: the same verdicts give the same interval.
"""

from __future__ import annotations

import polars as pl

from ...suites.history_metric import HistoryMetric

BOOTSTRAP_SAMPLES = 1000
SEED = 0
AFTER = "_after"
"""The suffix of the later night's columns in a paired frame."""


def figure(metric: HistoryMetric, sums: pl.DataFrame, suffix: str = "") -> pl.Series:
    """The figure of each row of `sums` (components named with `suffix`)."""
    return sums.select(pl.col(name + suffix).alias(name) for name in metric.components) \
        .select(metric.figure.cast(pl.Float64).alias("figure"))["figure"]


def _value(series: pl.Series) -> float | None:
    value = series[0] if series.len() else None
    return None if value is None or value != value else float(value)  # NaN: no figure


def _percentile(ordered: list[float], q: float) -> float:
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _interval(estimates: pl.Series) -> tuple[float | None, float | None]:
    kept = estimates.drop_nulls().drop_nans().sort().to_list()
    if not kept:
        return None, None
    return _percentile(kept, 0.025), _percentile(kept, 0.975)


def _draws(per_unit: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """Each replicate's sums: the n units of draw k are rows k*n..k*n+n-1 of one seeded sample
    (summed as the rows of a B x n array: a group-by over millions of rows cost seconds)."""
    n = per_unit.height
    return (per_unit.select(columns).sample(n * BOOTSTRAP_SAMPLES, with_replacement=True,
                                            seed=SEED)
            .select(pl.col(columns).reshape((BOOTSTRAP_SAMPLES, n)).arr.sum()))


def _per_unit(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    return frame.group_by("unit").agg(pl.col(columns).sum()).sort("unit")


def night_figure(metric: HistoryMetric, scored: pl.DataFrame
                 ) -> tuple[float | None, float | None, float | None]:
    """(figure, interval low, high) of the scored samples of one night and group."""
    columns = list(metric.components)
    if scored.is_empty():
        return None, None, None
    score = _value(figure(metric, scored.select(pl.col(columns).sum())))
    low, high = _interval(figure(metric, _draws(_per_unit(scored, columns), columns)))
    return score, low, high


def _paired_columns(metric: HistoryMetric) -> list[str]:
    return [*metric.components, *(name + AFTER for name in metric.components)]


def paired_delta(metric: HistoryMetric, both: pl.DataFrame) -> float | None:
    """Later minus earlier figure over samples both nights scored: each sample's components,
    and the later night's with the suffix AFTER."""
    if both.is_empty():
        return None
    totals = both.select(pl.col(_paired_columns(metric)).sum())
    before, after = _value(figure(metric, totals)), _value(figure(metric, totals, AFTER))
    return None if before is None or after is None else after - before


def paired_interval(metric: HistoryMetric, both: pl.DataFrame
                    ) -> tuple[float | None, float | None]:
    """The 95 % interval of paired_delta, both nights' figures taken on the same draws."""
    columns = _paired_columns(metric)
    draws = _draws(_per_unit(both, columns), columns)
    return _interval(figure(metric, draws, AFTER) - figure(metric, draws))
