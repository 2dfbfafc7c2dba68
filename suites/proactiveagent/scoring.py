"""Per-split metrics of ProactiveBench, with upstream's definitions (metrics.py), the counts
behind them, what was not scored and why, and 95 % bootstrap intervals that resample traces.

A split pools the events of its traces (every sample of every event). Two views are kept. The
strict one (split_scores.csv, metrics.json): only scored events enter TP/FP/TN/FN, and the
events whose every attempt failed are counted apart. Upstream's (metrics.csv, comparable with
the published files): such an event is a proposal of "candidate_task", a TP or an FP by the
judge's verdict on it, as upstream's scripts count it. `Total Events` is every pooled event in
both, as upstream's script counts it. The events of
one trace are answered in one growing chat and are not independent, so the bootstrap draws
traces, not events: each replicate draws as many traces as the split has, with replacement.
"""

from __future__ import annotations

import random

import polars as pl
import pyarrow as pa

from ...schemas.arrow import arrow_schema, frame_of
from .metrics import Counts, split_metrics
from .tables import SplitScoreRow

FAILED_EVENT_STATUSES = ("generation_error", "invalid_reply", "empty_response",
                         "truncated_response", "blocked_response", "refused")
"""Verdict statuses of an event whose every attempt failed (upstream keeps the test file's
`candidate_task` object as its prediction and judges it: see the upstream view)."""

BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0


def _counts(frame: pl.DataFrame) -> Counts:
    scored = frame.filter(pl.col("status") == "scored")
    proposed, accepted = pl.col("proposed"), pl.col("accepted")
    return Counts(
        true_positive=scored.filter(proposed & accepted).height,
        false_positive=scored.filter(proposed & ~accepted).height,
        true_negative=scored.filter(~proposed & accepted).height,
        false_negative=scored.filter(~proposed & ~accepted).height)


def _interval(per_trace: list[Counts], metric: str) -> tuple[float | None, float | None]:
    if not per_trace:
        return None, None
    draw = random.Random(BOOTSTRAP_SEED)
    values = []
    for _ in range(BOOTSTRAP_SAMPLES):
        total = Counts()
        for _ in per_trace:
            total = total + per_trace[draw.randrange(len(per_trace))]
        values.append(float(split_metrics("", total)[metric]))
    values.sort()
    return values[int(0.025 * len(values))], values[min(len(values) - 1,
                                                         int(0.975 * len(values)))]


def score_splits(judgments: pl.DataFrame) -> pl.DataFrame:
    """One row per (model, judge, judge prompt, split), splits in name order."""
    rows = []
    exploded = judgments.explode("splits").rename({"splits": "split"})
    keys = ["model", "judge", "judge_prompt_sha256", "split"]
    for (model, judge, prompt, split), group in exploded.sort(keys).group_by(
            keys, maintain_order=True):
        counts = _counts(group)
        metrics = split_metrics(str(split), counts)
        per_trace = [_counts(part) for _, part in group.group_by("trace", maintain_order=True)]
        f1_low, f1_high = _interval(per_trace, "F1-Score")
        accuracy_low, accuracy_high = _interval(per_trace, "Accuracy")
        status = group["status"]
        failed = group.filter(pl.col("status").is_in(FAILED_EVENT_STATUSES))
        if "judged_candidate_task" in failed.columns:  # verdicts stored before version 2 lack it
            failed = failed.filter(pl.col("judged_candidate_task"))
            failed_accepted = failed.filter(pl.col("accepted") == True).height  # noqa: E712
            failed_rejected = failed.filter(pl.col("accepted") == False).height  # noqa: E712
        else:
            failed_accepted = failed_rejected = 0
        missing = int((status == "not_imported").sum())  # the model was never asked them
        rows.append(SplitScoreRow(
            model=model, judge=judge, judge_prompt_sha256=prompt, split=split,
            events=group.height - missing, scored=counts.total, not_imported=missing,
            failed_events=int(status.is_in(FAILED_EVENT_STATUSES).sum()),
            failed_events_accepted=failed_accepted, failed_events_rejected=failed_rejected,
            true_positive=counts.true_positive,
            false_positive=counts.false_positive, true_negative=counts.true_negative,
            false_negative=counts.false_negative, recall=float(metrics["Recall"]),
            precision=float(metrics["Precision"]), accuracy=float(metrics["Accuracy"]),
            false_alarm=float(metrics["False-Alarm"]), f1=float(metrics["F1-Score"]),
            accept_rate=float(metrics["Accept Rate"]),
            not_scored=group.height - missing - counts.total,
            generation_errors=int((status == "generation_error").sum()),
            invalid_replies=int((status == "invalid_reply").sum()),
            judge_errors=int((status == "judge_error").sum()),
            non_answers=int(status.is_in(["empty_response", "truncated_response",
                                          "blocked_response"]).sum()),
            refused=int((status == "refused").sum()),
            f1_ci_low=f1_low, f1_ci_high=f1_high, accuracy_ci_low=accuracy_low,
            accuracy_ci_high=accuracy_high).model_dump(by_alias=True))
    return frame_of(pa.Table.from_pylist(rows, schema=arrow_schema(SplitScoreRow)))


def upstream_counts(row: dict[str, int]) -> Counts:
    """The counts upstream's scripts compute from the same replies and verdicts: each failed
    event a proposal of "candidate_task", accepted (TP) or rejected (FP)."""
    return Counts(true_positive=row["true_positive"] + row.get("failed_events_accepted", 0),
                  false_positive=row["false_positive"] + row.get("failed_events_rejected", 0),
                  true_negative=row["true_negative"], false_negative=row["false_negative"])


def upstream_rows(scores: pl.DataFrame) -> list[dict[str, float | int | str]]:
    """metrics.csv: upstream's columns, one row per split, computed as upstream's scripts do
    (failed events counted as proposals of "candidate_task"); `Total Events` counts every pooled
    event, scored or not, as upstream's script does."""
    out = []
    for row in scores.iter_rows(named=True):
        metrics = split_metrics(row["split"], upstream_counts(row))
        out.append({**metrics, "Total Events": row["events"]})
    return out
