"""leaderboard: per (evaluation, phase) counts, rates and a 95 % bootstrap interval of the
weighted score.

Triggers are clustered in dialogues (a model that misreads a persona fails all of its triggers),
so the bootstrap resamples dialogues, not triggers: each replicate draws as many dialogues as
there are, with replacement, and recomputes every phase from the same draw. The seed is fixed and
recorded, so the same judgments always give the same interval.
"""

from __future__ import annotations

import polars as pl

from .corpus import PHASES

STAGE = "leaderboard"
VERSION = 3  # 3: replicates drawn by polars (intervals differ from 2 for a seed)

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
    `per_dialogue` holds (pass + 0.5 partial, evaluated) for each dialogue. All `samples`
    replicates are drawn at once by polars (seeded): a sweep's leaderboard bootstraps every
    (evaluation, phase), and a draw at a time in Python cost seconds of CPU per sweep."""
    if not per_dialogue or not any(evaluated for _, evaluated in per_dialogue):
        return None, None
    n = len(per_dialogue)
    dialogues = pl.DataFrame({"credit": [float(c) for c, _ in per_dialogue],
                              "evaluated": [float(e) for _, e in per_dialogue]})
    replicates = (dialogues.sample(n * samples, with_replacement=True, seed=seed)
                  .with_row_index("draw")
                  .group_by(pl.col("draw") // n)
                  .agg(pl.col("credit").sum(), pl.col("evaluated").sum())
                  .filter(pl.col("evaluated") > 0))
    estimates = (replicates["credit"] / replicates["evaluated"]).sort().to_list()
    tail = (1 - confidence) / 2
    return _percentile(estimates, tail), _percentile(estimates, 1 - tail)


IDENTITY = ("evaluation", "label", "trigger_set", "source")
"""Columns after the contract ones: which evaluation a row is (its judgments artifact key), its
readable label, its trigger set and its source (run or import)."""


def with_identity(judgments: pl.DataFrame) -> pl.DataFrame:
    """Judgments with the identity columns; frames that lack them (one flow run's judgments)
    are one evaluation per (model, judge, judge prompt)."""
    if "evaluation" in judgments.columns:
        return judgments
    prompt = ["judge_prompt_sha256"] if "judge_prompt_sha256" in judgments.columns else []
    return judgments.with_columns(
        evaluation=pl.concat_str("model", "judge", *prompt, separator="|"),
        label=pl.concat_str("model", pl.lit(" judged by "), "judge"),
        trigger_set=pl.lit(""), source=pl.lit("run"))


def build_leaderboard(judgments: pl.DataFrame, *, samples: int = 1000, seed: int = 0,
                      confidence: float = 0.95) -> pl.DataFrame:
    """One row per (evaluation, phase) and OVERALL, in the leaderboard.csv column order: the
    contract columns, then the identity columns."""
    judgments = with_identity(judgments)
    scored = pl.col("status") == "scored"
    per_dialogue = (
        pl.concat([judgments, judgments.with_columns(phase=pl.lit(OVERALL))])
        .group_by("evaluation", "phase", "unique_id_eval")
        .agg(pl.col("model", "judge", "label", "trigger_set", "source").first(),
             credit=(scored & (pl.col("score") == "PASS")).sum()
             + 0.5 * (scored & (pl.col("score") == "PARTIAL")).sum(),
             evaluated=scored.sum(),
             triggers=pl.len(),
             passed=(scored & (pl.col("score") == "PASS")).sum(),
             partial=(scored & (pl.col("score") == "PARTIAL")).sum(),
             failed=(scored & (pl.col("score") == "FAIL")).sum())
        .sort("label", "evaluation", "phase", "unique_id_eval")
    )
    order = {phase: rank for rank, phase in enumerate(PHASES + (OVERALL,))}
    rows = []
    for (_, phase), group in per_dialogue.group_by("evaluation", "phase", maintain_order=True):
        evaluated = int(group["evaluated"].sum())
        passed, partial = int(group["passed"].sum()), int(group["partial"].sum())
        low, high = bootstrap_interval(list(zip(group["credit"].to_list(),
                                                group["evaluated"].to_list())),
                                       samples=samples, seed=seed, confidence=confidence)
        first = group.row(0, named=True)
        rows.append({
            "model": first["model"], "judge": first["judge"], "phase": phase,
            "evaluated": evaluated,
            "pass": passed, "partial": partial, "fail": int(group["failed"].sum()),
            "not_evaluated": int(group["triggers"].sum()) - evaluated,
            "pass_rate": passed / evaluated if evaluated else None,
            "weighted_score": (passed + 0.5 * partial) / evaluated if evaluated else None,
            "ci_low": low, "ci_high": high, "evaluation": first["evaluation"],
            "label": first["label"], "trigger_set": first["trigger_set"],
            "source": first["source"], "_order": order.get(phase, len(order)),
        })
    schema = {"model": pl.String, "judge": pl.String, "phase": pl.String,
              "evaluated": pl.Int64, "pass": pl.Int64, "partial": pl.Int64, "fail": pl.Int64,
              "not_evaluated": pl.Int64, "pass_rate": pl.Float64, "weighted_score": pl.Float64,
              "ci_low": pl.Float64, "ci_high": pl.Float64, "evaluation": pl.String,
              "label": pl.String, "trigger_set": pl.String, "source": pl.String,
              "_order": pl.Int64}
    return (pl.DataFrame(rows, schema=schema)
            .sort("trigger_set", "_order", pl.col("weighted_score").fill_null(-1.0),
                  descending=[False, False, True])
            .select(*COLUMNS, *IDENTITY))


def with_rank_ranges(board: pl.DataFrame) -> pl.DataFrame:
    """Adds `rank` per phase and trigger set: a single number where the intervals separate a row
    from all others, else the range of ranks it could hold ("1-3" means tied within its
    intervals with others). Rows scored on different trigger sets are never ranked together."""
    ranks: list[str] = []
    rows = board.to_dicts()
    for row in rows:
        peers = [r for r in rows if r["phase"] == row["phase"] and r is not row
                 and r.get("trigger_set") == row.get("trigger_set")
                 and r["ci_low"] is not None]
        if row["ci_low"] is None:
            ranks.append("-")
            continue
        surely_better = sum(1 for r in peers if r["ci_low"] > row["ci_high"])
        maybe_better = sum(1 for r in peers if r["ci_high"] >= row["ci_low"])
        best, worst = 1 + surely_better, 1 + maybe_better
        ranks.append(str(best) if best == worst else f"{best}-{worst}")
    return board.with_columns(pl.Series("rank", ranks, dtype=pl.String))
