"""Proactive Agent's nights in the history: each event's verdict and F1 per split, with
upstream's arithmetic (metrics.split_metrics) recomputed on any set of events, resampling traces
(the events of one trace share one chat: the unit of split_scores.csv's own intervals).

Only scored events count, as in split_scores.csv (the strict view)."""

from __future__ import annotations

import polars as pl

from ...history_metric import HistoryMetric, samples_frame
from ..metrics import EPSILON

_TP, _FP, _FN = pl.col("true_positive"), pl.col("false_positive"), pl.col("false_negative")
_RECALL = _TP / (_TP + _FN + EPSILON)
_PRECISION = _TP / (_TP + _FP + EPSILON)
METRIC = HistoryMetric(
    "F1", ("true_positive", "false_positive", "true_negative", "false_negative"),
    2 * _PRECISION * _RECALL / (_PRECISION + _RECALL + EPSILON))

_CELLS = {(True, True): ("proposed, accepted", "true_positive"),
          (True, False): ("proposed, rejected", "false_positive"),
          (False, True): ("none, accepted", "true_negative"),
          (False, False): ("none, rejected", "false_negative")}


def history_samples(judgments: pl.DataFrame) -> pl.DataFrame:
    rows = judgments.sort("trace", "event_index", "sample_index").explode("splits")
    scored = pl.col("status") == "scored"
    verdict = pl.lit(None, dtype=pl.String)
    for (proposed, accepted), (text, _) in _CELLS.items():
        verdict = pl.when(scored & (pl.col("proposed") == proposed)
                          & (pl.col("accepted") == accepted)).then(pl.lit(text)).otherwise(verdict)
    counts = [pl.when(verdict.is_null()).then(None).otherwise(
        (verdict == text).cast(pl.Float64)).alias(column) for text, column in _CELLS.values()]
    return samples_frame(METRIC, rows.select(
        pl.concat_str("trace", "event_index", "sample_index", separator="|").alias("sample"),
        pl.col("trace").alias("unit"), pl.col("splits").alias("group"),
        verdict.alias("verdict"), *counts))


def view_sample(sample: str) -> str:
    """The viewer's sample showing a history sample."""
    return sample.rsplit("|", 2)[0]  # the viewer shows a whole trace
