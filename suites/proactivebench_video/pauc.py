"""PAUC, the video ProactiveBench's score, as the benchmark's evaluation code defines it.

For each gold turn with reply window [s, e]: the model's replies stamped in the window (bounds
inclusive, exact duplicates dropped, the first kept) are judged one call each, the call for the
i-th reply sending replies 1..i joined by spaces; each judge score 1-3 becomes y = score - 1; a
score stamped after the turn's related window that is lower than the last score at or before the
related end is deleted; then with L = e - s a step function starts at 0.5, jumps to y_i at
x_i = (1 - omega)(t_i - s) and holds to L, and the turn scores its integral over [0, L] / (2L).
A turn without a judged reply scores 0.25, so a wrong reply (y = 0) scores below silence. A
part's PAUC is the plain mean over its gold turns (turn-weighted) x 100.

Pure functions, no I/O, no calls: the seam makes the judge calls from `judge_plan` and hands
the replies back to `parse_judge_score` and `score_turn`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Literal, Sequence

OMEGAS = (0.0, 0.5, 1.0)
"""The omegas PAUC is reported at: 0 weighs timing fully, 1 ignores when in the window."""

NO_REPLY_SCORE = 0.25
"""A turn with no judged reply: the starting value 0.5 held over the window, / 2."""

JUDGE_USER_TEMPLATE = "Question: {question}\nGround Truth Answer: {gold}\nPredicted Answer: {replies}"
"""The judge's user message; its system prompt is benchmark data, passed in by the seam."""

BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 0

TurnStatus = Literal["scored", "judge_error", "generation_error", "error"]
"""scored; judge_error (a judge reply held no readable score, or its call failed);
generation_error (the model's episode could not be completed); error (the video could not be
decoded). Only scored turns enter the mean; the others are counted."""
NOT_SCORED = ("judge_error", "generation_error", "error")


def omega_column(omega: float) -> str:
    """metrics.csv's column for an omega: pauc_0, pauc_0.5, pauc_1."""
    return f"pauc_{omega:g}"


class UnreadableScore(ValueError):
    """A judge reply whose first character is not 1, 2 or 3: the turn is a judge_error."""


@dataclass(frozen=True)
class Reply:
    """A reply of the model under test (not the silence marker)."""

    time: float
    """When it was said: the end of its step, in seconds from the video's start."""
    text: str
    """The reply as the model wrote it."""


@dataclass(frozen=True)
class JudgeRequest:
    """One judge call of a gold turn's plan."""

    time: float
    """The time of the newest reply it judges; its score is stamped at this time."""
    replies: str
    """The distinct in-window replies up to this one, joined by single spaces."""
    user_message: str
    """The judge's user message (JUDGE_USER_TEMPLATE filled in)."""


@dataclass(frozen=True)
class TurnScore:
    """A gold turn's PAUC at every omega, or why it has none."""

    status: TurnStatus
    """scored, or why the turn has no PAUC (TurnStatus)."""
    pauc: dict[float, float]
    """omega -> the turn's PAUC in [0, 1]; empty unless scored."""
    judged: int
    """Distinct in-window replies judged (0: the turn scores NO_REPLY_SCORE)."""
    final_score: int | None
    """The time-agnostic view: the last kept judge score (1-3), None without a judged reply."""
    late_lower_deleted: int
    """Scores deleted by the late-lower rule."""


def in_window(replies: Iterable[Reply], start: float, end: float) -> list[Reply]:
    """The replies with start <= time <= end, in time order, exact duplicates (same text)
    dropped after their first occurrence."""
    seen: set[str] = set()
    kept = []
    for reply in sorted(replies, key=lambda r: r.time):
        if start <= reply.time <= end and reply.text not in seen:
            seen.add(reply.text)
            kept.append(reply)
    return kept


def judge_plan(question: str, gold: str, replies: Iterable[Reply], start: float,
               end: float) -> list[JudgeRequest]:
    """One judge request per distinct in-window reply of a gold turn whose reply window is
    [start, end], each sending the replies so far."""
    plan = []
    texts: list[str] = []
    for reply in in_window(replies, start, end):
        texts.append(reply.text)
        joined = " ".join(texts)
        plan.append(JudgeRequest(time=reply.time, replies=joined, user_message=(
            JUDGE_USER_TEMPLATE.format(question=question, gold=gold, replies=joined))))
    return plan


def parse_judge_score(text: str) -> int:
    """The judge's score as the official code reads it: the reply's first character. Only 1, 2
    and 3 are scores; anything else (empty, a space, "0", a word) raises UnreadableScore rather
    than becoming a number outside the scale."""
    if not text or text[0] not in "123":
        shown = text[:40] + ("..." if len(text) > 40 else "")
        raise UnreadableScore(f"judge reply does not start with 1, 2 or 3: {shown!r}")
    return int(text[0])


def apply_late_lower_rule(scored: Sequence[tuple[float, int]],
                          related_end: float) -> list[tuple[float, int]]:
    """(time, score) in time order without the scores stamped after `related_end` that are
    lower than the last score at or before it (none is deleted when there is no such score)."""
    ordered = sorted(scored, key=lambda point: point[0])
    on_time = [score for time, score in ordered if time <= related_end]
    if not on_time:
        return ordered
    bar = on_time[-1]
    return [(time, score) for time, score in ordered if time <= related_end or score >= bar]


def turn_pauc(points: Sequence[tuple[float, int]], start: float, end: float,
              omega: float) -> float:
    """The area ratio of one turn from its kept (time, score 1-3) points in time order.

    L = 0 (a window of one instant) is undefined upstream (a division by zero); here it takes
    the limit of the formula as L -> 0: every point sits at x = 0, so the turn scores the last
    y / 2 (0.25 without a point) at every omega, as at omega 1 for any window."""
    if end < start:
        raise ValueError(f"reply window ends before it starts: [{start}, {end}]")
    if not points:
        return NO_REPLY_SCORE
    length = end - start
    if length == 0:
        return (points[-1][1] - 1) / 2
    area, value, position = 0.0, 0.5, 0.0
    for time, score in points:
        x = (1 - omega) * (time - start)
        area += value * (x - position)
        value, position = score - 1, x
    area += value * (length - position)
    return area / (2 * length)


def score_turn(judged: Sequence[tuple[float, str]], start: float, end: float,
               related_end: float, omegas: Sequence[float] = OMEGAS) -> TurnScore:
    """A gold turn's score from its judge plan's (time, judge reply) pairs, in plan order."""
    try:
        scores = [(time, parse_judge_score(text)) for time, text in judged]
    except UnreadableScore:
        return TurnScore("judge_error", {}, len(judged), None, 0)
    kept = apply_late_lower_rule(scores, related_end)
    return TurnScore(
        status="scored", pauc={omega: turn_pauc(kept, start, end, omega) for omega in omegas},
        judged=len(judged), final_score=kept[-1][1] if kept else None,
        late_lower_deleted=len(scores) - len(kept))


@dataclass(frozen=True)
class TurnResult:
    """A scored gold turn as the aggregation sees it."""

    part: str
    """WEB, EGO, TV or VAD."""
    sample: str
    """The sample's question_id: the bootstrap's unit."""
    score: TurnScore
    """Its score, or the reason it has none."""


def _percentile(ordered: list[float], q: float) -> float:
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def bootstrap_interval(per_sample: Sequence[tuple[float, int]], *, samples: int = BOOTSTRAP_SAMPLES,
                       seed: int = BOOTSTRAP_SEED,
                       confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of sum(turn PAUC) / turns x 100 over samples drawn with replacement
    (the turns of one sample share one chat, so they are not independent); `per_sample` holds
    (summed PAUC of its scored turns, scored turns). Seeded: the same turns give the same
    interval."""
    if not any(count for _, count in per_sample):
        return None, None
    draw = random.Random(seed)
    n = len(per_sample)
    estimates = []
    for _ in range(samples):
        total = count = 0.0
        for _ in range(n):
            pauc, turns = per_sample[draw.randrange(n)]
            total, count = total + pauc, count + turns
        if count:
            estimates.append(100 * total / count)
    estimates.sort()
    tail = (1 - confidence) / 2
    return _percentile(estimates, tail), _percentile(estimates, 1 - tail)


def part_metrics(turns: Iterable[TurnResult], omegas: Sequence[float] = OMEGAS, *,
                 samples: int = BOOTSTRAP_SAMPLES,
                 seed: int = BOOTSTRAP_SEED) -> list[dict[str, float | int | str | None]]:
    """One row per part, parts in name order: `part, turns, pauc_0, pauc_0.5, pauc_1` (the
    metrics.csv contract; turns = scored turns, the mean's denominator), then the count of each
    status that is not scored (judge_errors, generation_errors, errors), each omega's bootstrap
    interval, and the time-agnostic view: how many turns ended
    with a judged reply, their mean final score (1-3) and the count of each final score."""
    by_part: dict[str, list[TurnResult]] = {}
    for turn in turns:
        by_part.setdefault(turn.part, []).append(turn)
    rows = []
    for part in sorted(by_part):
        scored = [t for t in by_part[part] if t.score.status == "scored"]
        row: dict[str, float | int | str | None] = {"part": part, "turns": len(scored)}
        for omega in omegas:
            row[omega_column(omega)] = (100 * sum(t.score.pauc[omega] for t in scored)
                                        / len(scored)) if scored else None
        for status in NOT_SCORED:
            row[f"{status}s"] = sum(t.score.status == status for t in by_part[part])
        row["refused"] = sum(t.score.status == "refused" for t in by_part[part])
        for omega in omegas:
            per_sample: dict[str, tuple[float, int]] = {}
            for t in by_part[part]:
                pauc, count = per_sample.get(t.sample, (0.0, 0))
                if t.score.status == "scored":
                    pauc, count = pauc + t.score.pauc[omega], count + 1
                per_sample[t.sample] = (pauc, count)
            low, high = bootstrap_interval(list(per_sample.values()), samples=samples,
                                           seed=seed)
            row[f"{omega_column(omega)}_ci_low"], row[f"{omega_column(omega)}_ci_high"] = \
                low, high
        finals = [t.score.final_score for t in scored if t.score.final_score is not None]
        row["answered"] = len(finals)
        row["final_score_mean"] = sum(finals) / len(finals) if finals else None
        for value in (3, 2, 1):
            row[f"final_{value}"] = finals.count(value)
        rows.append(row)
    return rows
