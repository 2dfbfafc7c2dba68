"""A night file read against its schema, before the history uses it.

A night that cannot be read (a truncated file), whose samples do not form a table (columns of
uneven length) or whose values are impossible (a component below 0, a figure outside 0-1, a
recorded score of 7.0) is set aside: the history skips it with one line naming it and why, a
sweep compares with the newest readable night, and `proactflow history` shows the gap.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from ...common.errors import UserError
from ...suites import get_suite
from ...suites.history_metric import HistoryMetric, samples_frame, with_overall


def metric_of(suite: str) -> HistoryMetric | None:
    """The history metric of a suite known to this process (None: not scored here)."""
    try:
        return get_suite(suite).history_metric
    except UserError:
        return None


def pair_frame(suite: str, pair: dict[str, Any]) -> tuple[HistoryMetric, pl.DataFrame] | None:
    """A recorded pair's samples, typed, with its suite's metric; None when it has none."""
    samples, metric = pair.get("samples"), metric_of(suite)
    if not samples or metric is None:
        return None
    legacy = get_suite(suite).legacy_history_samples(samples)
    if legacy is not None:  # recorded before the suite declared its history
        return metric, with_overall(metric, legacy)
    if not set(metric.components) <= set(samples):
        return None
    frame = pl.DataFrame(samples)
    if "unit" not in frame.columns:  # each sample its own unit (nights.samples_record)
        frame = frame.with_columns(unit=pl.col("sample"))
    return metric, with_overall(metric, samples_frame(metric, frame))


def _outside(value: Any) -> bool:
    """A figure that is not a number in 0-1 (None: not computed, allowed)."""
    if value is None:
        return False
    return not isinstance(value, (int, float)) or math.isnan(value) or not 0.0 <= value <= 1.0


def _pair_problem(suite: str, pair: Any) -> str | None:
    if not isinstance(pair, dict) or not isinstance(pair.get("model"), str) \
            or not isinstance(pair.get("judge"), str):
        return "a pair without its model and judge"
    name = f"{pair['model']} judged by {pair['judge']}"
    samples = pair.get("samples")
    if samples is not None:
        if not isinstance(samples, dict) or not all(isinstance(v, list)
                                                    for v in samples.values()):
            return f"{name}: samples are not columns"
        lengths = {column: len(values) for column, values in samples.items()}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{column} {n}" for column, n in lengths.items())
            return f"{name}: uneven columns ({shown})"
        try:
            found = pair_frame(suite, pair)
        except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
            return f"{name}: samples not readable ({str(exc).splitlines()[0][:200]})"
        if found is not None:
            metric, frame = found
            components = frame.select(metric.components)
            if any((components[c] < 0).any() for c in metric.components):
                return f"{name}: a negative {metric.name} component"
            per_sample = frame.select(metric.figure.alias("figure"))["figure"]
            worst = per_sample.filter(per_sample.is_not_nan() & ((per_sample < 0)
                                                                  | (per_sample > 1)))
            if worst.len():
                return (f"{name}: impossible {metric.name} {worst[0]:g} for one sample "
                        "(a figure is 0-1)")
    for score in pair.get("scores") or []:
        if not isinstance(score, dict):
            return f"{name}: a score that is not a record"
        for field in ("score", "ci_low", "ci_high"):
            if _outside(score.get(field)):
                return (f"{name}: impossible {field} {score.get(field)!r} in group "
                        f"{score.get('group')} (a figure is 0-1)")
    return None


def night_problem(content: Any) -> str | None:
    """Why a night's content cannot be used, or None when it is sound."""
    if not isinstance(content, dict):
        return "not a night record"
    pairs = content.get("pairs")
    if not isinstance(pairs, list):
        return "no list of pairs"
    for pair in pairs:
        problem = _pair_problem(str(content.get("suite") or ""), pair)
        if problem is not None:
            return problem
    return None
