"""Scores per night and the changes between nights that are real.

A night's score of a (model, judge) per group (a ProactBench phase, and OVERALL) is the
suite's weighted score with its 95 % bootstrap interval over the suite's resampling unit (a
dialogue). Between two nights that evaluated the same (model, judge), the difference is taken
over the samples both scored, paired: each replicate draws units with replacement and takes the
difference of the two nights' scores on those same units, so the noise the two nights share
(which dialogues happen to be in the corpus) cancels. A difference whose interval excludes 0
and whose size exceeds the threshold is a finding: a regression or an improvement.

A judge whose served snapshot changed between the nights makes their scores not comparable:
no finding is drawn across that break, and the history marks it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from ..suites.proactbench.leaderboard import OVERALL, bootstrap_interval
from .history import CREDIT, Night

BOOTSTRAP_SAMPLES = 1000
SEED = 0


def snapshot_text(snapshot: dict[str, Any] | None) -> str:
    if not snapshot or not snapshot.get("served_model"):
        return ""
    fingerprint = snapshot.get("system_fingerprint")
    return str(snapshot["served_model"]) + (f" ({fingerprint})" if fingerprint else "")


def point_label(pair: dict[str, Any]) -> str:
    """What a point of the chart is labelled with: the revision and the served snapshot (a new
    snapshot behind an unchanged revision label is a new point), else the model."""
    parts = [text for text in (pair.get("revision"), snapshot_text(pair.get("snapshot")))
             if text]
    return ", ".join(parts) or str(pair["model"])


def _frame(pair: dict[str, Any]) -> pl.DataFrame | None:
    samples = pair.get("samples")
    if not samples:
        return None
    frame = pl.DataFrame(samples, schema={"sample": pl.String, "unit": pl.String,
                                          "group": pl.String, "verdict": pl.String})
    frame = frame.with_columns(credit=pl.col("verdict").replace_strict(CREDIT, default=None,
                                                                       return_dtype=pl.Float64))
    return pl.concat([frame, frame.with_columns(group=pl.lit(OVERALL))])


def _interval(per_unit: pl.DataFrame, credit: str, count: str) -> tuple[float | None,
                                                                         float | None]:
    return bootstrap_interval(list(zip(per_unit[credit].to_list(), per_unit[count].to_list())),
                              samples=BOOTSTRAP_SAMPLES, seed=SEED)


def pair_scores(pair: dict[str, Any]) -> list[dict[str, Any]]:
    """Per group: samples scored, weighted score and its interval."""
    frame = _frame(pair)
    if frame is None:
        return []
    rows = []
    for (group,), part in frame.group_by("group", maintain_order=True):
        scored = part.filter(pl.col("credit").is_not_null())
        per_unit = scored.group_by("unit").agg(credit=pl.col("credit").sum(),
                                               count=pl.len().cast(pl.Float64)).sort("unit")
        low, high = _interval(per_unit, "credit", "count")
        rows.append({"group": group, "evaluated": scored.height,
                     "score": float(scored["credit"].mean()) if scored.height else None,  # type: ignore[arg-type]
                     "ci_low": low, "ci_high": high})
    return rows


@dataclass(frozen=True)
class Finding:
    """A change between two nights whose interval excludes 0 and exceeds the threshold."""

    kind: str
    """`regression` or `improvement`."""
    series: str
    suite: str
    model: str
    judge: str
    group: str
    delta: float
    ci_low: float
    ci_high: float
    samples: int
    """Samples both nights scored."""
    before: str
    """The earlier night's date, and its point label."""
    after: str
    changed: list[dict[str, Any]] = field(default_factory=list)
    """The samples whose verdict changed: sample, before, after."""
    links: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return (f"{self.kind.upper()}: {self.model} judged by {self.judge} ({self.suite}, "
                f"{self.group}): {100 * self.delta:+.1f} points [{100 * self.ci_low:+.1f}, "
                f"{100 * self.ci_high:+.1f}] over {self.samples} samples both nights scored, "
                f"{self.before} -> {self.after}; {len(self.changed)} changed verdict")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge_break(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether the judge's served snapshot changed between two nights of a pair."""
    old, new = before.get("judge_snapshot") or {}, after.get("judge_snapshot") or {}
    return bool(old.get("served_model") and new.get("served_model")) and \
        (old.get("served_model"), old.get("system_fingerprint")) != \
        (new.get("served_model"), new.get("system_fingerprint"))


def compare(series: str, suite: str, before: tuple[Night, dict[str, Any]],
            after: tuple[Night, dict[str, Any]], threshold: float) -> list[Finding]:
    """The findings between two nights of one (model, judge), one per group at most."""
    (night_a, pair_a), (night_b, pair_b) = before, after
    frame_a, frame_b = _frame(pair_a), _frame(pair_b)
    if frame_a is None or frame_b is None or judge_break(pair_a, pair_b):
        return []
    both = (frame_a.join(frame_b, on=["sample", "group"], suffix="_after")
            .filter(pl.col("credit").is_not_null() & pl.col("credit_after").is_not_null()))
    findings = []
    for (group,), part in both.group_by("group", maintain_order=True):
        per_unit = part.group_by("unit").agg(
            diff=(pl.col("credit_after") - pl.col("credit")).sum(),
            count=pl.len().cast(pl.Float64)).sort("unit")  # the seeded draw's order
        delta = float(per_unit["diff"].sum()) / float(per_unit["count"].sum())
        low, high = _interval(per_unit, "diff", "count")
        if low is None or high is None or (low <= 0 <= high) or abs(delta) <= threshold:
            continue
        changed = part.filter(pl.col("verdict") != pl.col("verdict_after")).sort("sample")
        findings.append(Finding(
            "improvement" if delta > 0 else "regression", series, suite, pair_b["model"],
            pair_b["judge"], str(group), delta, low, high, part.height,
            f"{night_a.date} ({point_label(pair_a)})", f"{night_b.date} ({point_label(pair_b)})",
            [{"sample": s, "before": v, "after": w} for s, v, w in
             changed.select("sample", "verdict", "verdict_after").rows()],
            {"before_viewer": night_a.content.get("viewer"),
             "after_viewer": night_b.content.get("viewer")}))
    return findings


def _previous(nights: list[Night], index: int, pair: dict[str, Any]
              ) -> tuple[Night, dict[str, Any]] | None:
    for night in reversed(nights[:index]):
        for earlier in night.pairs:
            if (earlier["model"], earlier["judge"]) == (pair["model"], pair["judge"]):
                return night, earlier
    return None


def findings_of(nights: list[Night], index: int, threshold: float) -> list[Finding]:
    """The findings of night `index` against the latest earlier night of each of its pairs
    (nights of one series and suite, oldest first)."""
    night, found = nights[index], []
    for pair in night.pairs:
        previous = _previous(nights, index, pair)
        if previous is not None:
            found += compare(night.series, night.suite, previous, (night, pair), threshold)
    return found


def history_table(nights: list[Night]) -> pl.DataFrame:
    """One row per night, (model, judge) and group: the score with its interval, the point's
    label, the snapshots, whether the judge changed since the pair's previous night (a break),
    and links to that night's report and viewer."""
    rows = []
    for index, night in enumerate(nights):
        for pair in night.pairs:
            previous = _previous(nights, index, pair)
            broken = previous is not None and judge_break(previous[1], pair)
            for score in pair_scores(pair):
                rows.append({
                    "series": night.series, "suite": night.suite,
                    "night": night.night.isoformat(), "model": pair["model"],
                    "judge": pair["judge"], "point": point_label(pair),
                    "revision": pair.get("revision"),
                    "snapshot": snapshot_text(pair.get("snapshot")),
                    "judge_snapshot": snapshot_text(pair.get("judge_snapshot")),
                    "judge_changed": broken, **score,
                    "report": night.content.get("report"),
                    "viewer": night.content.get("viewer")})
    schema = {"series": pl.String, "suite": pl.String, "night": pl.String, "model": pl.String,
              "judge": pl.String, "point": pl.String, "revision": pl.String,
              "snapshot": pl.String, "judge_snapshot": pl.String, "judge_changed": pl.Boolean,
              "group": pl.String, "evaluated": pl.Int64, "score": pl.Float64,
              "ci_low": pl.Float64, "ci_high": pl.Float64, "report": pl.String,
              "viewer": pl.String}
    return pl.DataFrame(rows, schema=schema)


def all_findings(nights: list[Night], threshold: float | None = None) -> list[Finding]:
    """The findings of every night against the one before in its series and suite; the
    threshold each night's sweep file set, unless `threshold` is given."""
    by_series: dict[tuple[str, str], list[Night]] = {}
    for night in nights:
        by_series.setdefault((night.series, night.suite), []).append(night)
    found = []
    for series in by_series.values():
        for index, night in enumerate(series):
            limit = threshold if threshold is not None else \
                float(night.content.get("regression_threshold") or 0.0)
            found += findings_of(series, index, limit)
    return found
