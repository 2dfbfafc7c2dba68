"""Scores per night and the changes between nights that are real.

A night's figure of a (model, judge) per group is the one its suite declares for the history
(suites/history_metric.py: ProactBench's weighted score per phase, Proactive Agent's F1 per
split, the multimodal suite's acc or agg per dataset, the video suite's PAUC per part), with
its 95 % bootstrap interval over the suite's resampling unit. Between two nights that evaluated
the same (model, judge, variant), the difference is taken over the samples both scored, paired
on the same draws of units (bootstrap.py). A difference whose interval excludes 0 and
whose size exceeds the threshold is a finding: a regression or an improvement.

A judge whose served snapshot changed between the nights makes their scores not comparable:
no finding is drawn across that break, and the history marks it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Collection, Iterable

import polars as pl

from .nights import Night, with_gaps
from .checks import metric_of, pair_frame
from .bootstrap import AFTER, night_figure, paired_delta, paired_interval


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


def pair_scores(suite: str, pair: dict[str, Any]) -> list[dict[str, Any]]:
    """Per group: samples scored, the figure and its interval; as the night recorded them when
    it did (nightly.record_pairs: computed once, when the sweep ends)."""
    if pair.get("scores"):
        return list(pair["scores"])
    found = pair_frame(suite, pair)
    if found is None:
        return []
    metric, frame = found
    rows = []
    for (group,), part in frame.group_by("group", maintain_order=True):
        scored = part.filter(pl.col("verdict").is_not_null())
        score, low, high = night_figure(metric, scored)
        rows.append({"group": group, "metric": metric.name, "evaluated": scored.height,
                     "score": score, "ci_low": low, "ci_high": high})
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
    metric: str = "weighted score"
    """The suite's history metric the delta is of."""
    variant: str = ""
    """The evaluation's variant, for a suite with more than one way to run."""
    evaluations: tuple[str, str] = ("", "")
    """The judgments artifact keys of the earlier and the later night."""
    versions: tuple[int | None, int | None] = (None, None)
    """The versions of those artifacts the nights read (artifact.Artifact.version; None: not
    recorded)."""
    responses_read: tuple[tuple[str, int] | None, tuple[str, int] | None] = (None, None)
    """The responses key and version each night read (None: not recorded)."""
    skipped: list[str] = field(default_factory=list)
    """The nights between the two compared (gone, set aside, or without this pair): they are
    not consecutive."""

    def line(self) -> str:
        where = ", ".join(part for part in (self.suite, self.variant, self.group) if part)
        return (f"{self.kind.upper()}: {self.model} judged by {self.judge} ({where}): "
                f"{self.metric} {100 * self.delta:+.1f} points [{100 * self.ci_low:+.1f}, "
                f"{100 * self.ci_high:+.1f}] over {self.samples} samples both nights scored, "
                f"{self.before} -> {self.after}"
                + (f" (not consecutive: {'; '.join(self.skipped)} between)"
                   if self.skipped else "")
                + f"; {len(self.changed)} changed verdict")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge_break(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Whether the judge's served snapshot changed between two nights of a pair."""
    old, new = before.get("judge_snapshot") or {}, after.get("judge_snapshot") or {}
    return bool(old.get("served_model") and new.get("served_model")) and \
        (old.get("served_model"), old.get("system_fingerprint")) != \
        (new.get("served_model"), new.get("system_fingerprint"))


def _same(pair: dict[str, Any], other: dict[str, Any]) -> bool:
    return all((pair.get(name) or "") == (other.get(name) or "")
               for name in ("model", "judge", "variant"))


def compare(series: str, suite: str, before: tuple[Night, dict[str, Any]],
            after: tuple[Night, dict[str, Any]], threshold: float) -> list[Finding]:
    """The findings between two nights of one (model, judge), one per group at most."""
    (night_a, pair_a), (night_b, pair_b) = before, after
    found_a, found_b = pair_frame(suite, pair_a), pair_frame(suite, pair_b)
    if found_a is None or found_b is None or judge_break(pair_a, pair_b):
        return []
    metric, frame_a = found_a
    both = (frame_a.join(found_b[1], on=["sample", "group"], suffix=AFTER)
            .filter(pl.col("verdict").is_not_null() & pl.col("verdict" + AFTER).is_not_null()))
    findings = []
    for (group,), part in both.group_by("group", maintain_order=True):
        delta = paired_delta(metric, part)
        if delta is None or abs(delta) <= threshold:  # never a finding: no draw needed
            continue
        low, high = paired_interval(metric, part)
        if low is None or high is None or low <= 0 <= high:
            continue
        changed = part.filter(pl.col("verdict") != pl.col("verdict" + AFTER)).sort("sample")
        findings.append(Finding(
            "improvement" if delta > 0 else "regression", series, suite, pair_b["model"],
            pair_b["judge"], str(group), delta, low, high, part.height,
            f"{night_a.date} ({point_label(pair_a)})", f"{night_b.date} ({point_label(pair_b)})",
            [{"sample": s, "before": v, "after": w} for s, v, w in
             changed.select("sample", "verdict", "verdict" + AFTER).rows()],
            {"before_viewer": night_a.content.get("viewer"),
             "after_viewer": night_b.content.get("viewer")},
            metric.name, str(pair_b.get("variant") or ""),
            (str(pair_a.get("judgments") or ""), str(pair_b.get("judgments") or "")),
            (pair_a.get("judgments_version"), pair_b.get("judgments_version")),
            (_responses_read(pair_a), _responses_read(pair_b))))
    return findings


def _responses_read(pair: dict[str, Any]) -> tuple[str, int] | None:
    version = pair.get("responses_version")
    return (str(pair["responses"]), version) if pair.get("responses") and isinstance(
        version, int) else None


def _previous(nights: list[Night], index: int, pair: dict[str, Any]
              ) -> tuple[Night, dict[str, Any]] | None:
    for night in reversed(nights[:index]):
        for earlier in night.pairs:
            if _same(earlier, pair):
                return night, earlier
    return None


def findings_of(nights: list[Night], index: int, threshold: float) -> list[Finding]:
    """The findings of night `index` against the latest earlier night of each of its pairs
    (nights of one series and suite, oldest first); each names the nights between the two it
    compares, if any."""
    night, found = nights[index], []
    for pair in night.pairs:
        previous = _previous(nights, index, pair)
        if previous is not None:
            start = next(i for i in range(index - 1, -1, -1) if nights[i] is previous[0])
            between = [_skipped(n) for n in nights[start + 1:index]]
            found += [replace(f, skipped=between) if between else f for f in
                      compare(night.series, night.suite, previous, (night, pair), threshold)]
    return found


def _skipped(night: Night) -> str:
    if night.gone:
        return f"{night.date} gone"
    if night.set_aside:
        return f"{night.date} set aside"
    return f"{night.date} without this pair"


def night_findings(newest_first: Iterable[Night], run_id: str, threshold: float,
                   present: Collection[str] = ()) -> list[Finding]:
    """`findings_of` the night that `run_id` recorded, reading its series (newest first) only
    back to the latest earlier night of each of its pairs, not the whole series; `present`: the
    names of the series' files, for the nights gone between (nights.with_gaps)."""
    read: list[Night] = []
    waiting: list[dict[str, Any]] | None = None  # its pairs still without an earlier night
    for night in newest_first:
        read.append(night)
        if waiting is None:
            if night.content.get("run_id") == run_id:
                waiting = night.pairs
        else:
            waiting = [p for p in waiting if not any(_same(e, p) for e in night.pairs)]
        if waiting == []:
            break
    if waiting is None:
        raise ValueError(f"no night of run {run_id} in the series")
    read.reverse()
    if present:
        read = with_gaps(read, present)
    index = next(i for i, n in reversed(list(enumerate(read)))
                 if n.content.get("run_id") == run_id)
    return findings_of(read, index, threshold)


def history_table(nights: list[Night]) -> pl.DataFrame:
    """One row per night, (model, judge) and group: the score with its interval, the point's
    label, the snapshots, whether the judge changed since the pair's previous night (a break),
    and links to that night's report and viewer. A gap is one row: a night set aside
    (checks.py) or gone (nights.with_gaps), its `gap` saying which, its `set_aside`
    which file and why."""
    rows: list[dict[str, Any]] = []
    for index, night in enumerate(nights):
        if night.set_aside:  # a gap: the night's row says it was set aside or gone, and why
            rows.append({"series": night.series, "suite": night.suite,
                         "night": night.night.isoformat(), "judge_changed": False,
                         "set_aside": f"{night.location}: {night.set_aside}",
                         "gap": "gone" if night.gone else "set aside"})
        for pair in night.pairs:
            previous = _previous(nights, index, pair)
            broken = previous is not None and judge_break(previous[1], pair)
            for score in pair_scores(night.suite, pair):
                rows.append({
                    "series": night.series, "suite": night.suite,
                    "night": night.night.isoformat(), "model": pair["model"],
                    "judge": pair["judge"], "variant": pair.get("variant") or "",
                    "point": point_label(pair),
                    "revision": pair.get("revision"),
                    "snapshot": snapshot_text(pair.get("snapshot")),
                    "judge_snapshot": snapshot_text(pair.get("judge_snapshot")),
                    "judge_changed": broken, **score,
                    "report": night.content.get("report"),
                    "viewer": night.content.get("viewer"), "set_aside": None, "gap": None})
    schema = {"series": pl.String, "suite": pl.String, "night": pl.String, "model": pl.String,
              "judge": pl.String, "variant": pl.String, "point": pl.String,
              "revision": pl.String, "snapshot": pl.String, "judge_snapshot": pl.String,
              "judge_changed": pl.Boolean, "group": pl.String, "metric": pl.String,
              "evaluated": pl.Int64, "score": pl.Float64,
              "ci_low": pl.Float64, "ci_high": pl.Float64, "report": pl.String,
              "viewer": pl.String, "set_aside": pl.String, "gap": pl.String}
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
