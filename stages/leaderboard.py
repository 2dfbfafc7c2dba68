"""leaderboard: per (model, judge, phase) counts, rates and a 95 % bootstrap interval of the
weighted score.

Triggers are clustered in dialogues (a model that misreads a persona fails all of its triggers),
so the bootstrap resamples dialogues, not triggers: each replicate draws as many dialogues as
there are, with replacement, and recomputes every phase from the same draw. The seed is fixed and
recorded, so the same judgments always give the same interval.
"""

from __future__ import annotations

import random

import polars as pl

from ..schemas.corpus import PHASES

STAGE = "leaderboard"
VERSION = 1

OVERALL = "OVERALL"
COLUMNS = ("model", "judge", "phase", "evaluated", "pass", "partial", "fail", "not_evaluated",
           "pass_rate", "weighted_score", "ci_low", "ci_high")


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values."""
    position = (len(sorted_values) - 1) * q
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def bootstrap_interval(per_dialogue: list[tuple[float, int]], *, samples: int, seed: int,
                       confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of sum(credit)/sum(evaluated) over dialogues drawn with replacement;
    `per_dialogue` holds (pass + 0.5 partial, evaluated) for each dialogue."""
    if not per_dialogue or not any(evaluated for _, evaluated in per_dialogue):
        return None, None
    rng = random.Random(seed)
    n = len(per_dialogue)
    estimates = []
    for _ in range(samples):
        credit = evaluated = 0.0
        for _ in range(n):
            c, e = per_dialogue[rng.randrange(n)]
            credit += c
            evaluated += e
        if evaluated:
            estimates.append(credit / evaluated)
    estimates.sort()
    tail = (1 - confidence) / 2
    return _percentile(estimates, tail), _percentile(estimates, 1 - tail)


def build_leaderboard(judgments: pl.DataFrame, *, samples: int = 1000, seed: int = 0,
                      confidence: float = 0.95) -> pl.DataFrame:
    """One row per (model, judge, phase) and OVERALL, in the leaderboard.csv column order."""
    scored = pl.col("status") == "scored"
    per_dialogue = (
        pl.concat([judgments, judgments.with_columns(phase=pl.lit(OVERALL))])
        .group_by("model", "judge", "phase", "unique_id_eval")
        .agg(credit=(scored & (pl.col("score") == "PASS")).sum()
             + 0.5 * (scored & (pl.col("score") == "PARTIAL")).sum(),
             evaluated=scored.sum(),
             triggers=pl.len(),
             passed=(scored & (pl.col("score") == "PASS")).sum(),
             partial=(scored & (pl.col("score") == "PARTIAL")).sum(),
             failed=(scored & (pl.col("score") == "FAIL")).sum())
        .sort("model", "judge", "phase", "unique_id_eval")
    )
    order = {phase: rank for rank, phase in enumerate(PHASES + (OVERALL,))}
    rows = []
    for (model, judge, phase), group in per_dialogue.group_by("model", "judge", "phase",
                                                              maintain_order=True):
        evaluated = int(group["evaluated"].sum())
        passed, partial = int(group["passed"].sum()), int(group["partial"].sum())
        low, high = bootstrap_interval(list(zip(group["credit"].to_list(),
                                                group["evaluated"].to_list())),
                                       samples=samples, seed=seed, confidence=confidence)
        rows.append({
            "model": model, "judge": judge, "phase": phase, "evaluated": evaluated,
            "pass": passed, "partial": partial, "fail": int(group["failed"].sum()),
            "not_evaluated": int(group["triggers"].sum()) - evaluated,
            "pass_rate": passed / evaluated if evaluated else None,
            "weighted_score": (passed + 0.5 * partial) / evaluated if evaluated else None,
            "ci_low": low, "ci_high": high, "_order": order.get(phase, len(order)),
        })
    schema = {"model": pl.String, "judge": pl.String, "phase": pl.String,
              "evaluated": pl.Int64, "pass": pl.Int64, "partial": pl.Int64, "fail": pl.Int64,
              "not_evaluated": pl.Int64, "pass_rate": pl.Float64, "weighted_score": pl.Float64,
              "ci_low": pl.Float64, "ci_high": pl.Float64, "_order": pl.Int64}
    return (pl.DataFrame(rows, schema=schema)
            .sort("_order", pl.col("weighted_score").fill_null(-1.0), descending=[False, True])
            .select(COLUMNS))


def with_rank_ranges(board: pl.DataFrame) -> pl.DataFrame:
    """Adds `rank` per phase: a single number where the intervals separate a row from all others,
    else the range of ranks it could hold ("1-3" means tied within its intervals with others)."""
    ranks: list[str] = []
    rows = board.to_dicts()
    for row in rows:
        peers = [r for r in rows if r["phase"] == row["phase"] and r is not row
                 and r["ci_low"] is not None]
        if row["ci_low"] is None:
            ranks.append("-")
            continue
        surely_better = sum(1 for r in peers if r["ci_low"] > row["ci_high"])
        maybe_better = sum(1 for r in peers if r["ci_high"] >= row["ci_low"])
        best, worst = 1 + surely_better, 1 + maybe_better
        ranks.append(str(best) if best == worst else f"{best}-{worst}")
    return board.with_columns(pl.Series("rank", ranks, dtype=pl.String))
