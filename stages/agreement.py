"""agreement: how far two judges agree on the same responses, per phase and overall.

Only triggers that both judges scored count. Cohen's kappa corrects percent agreement for the
agreement the two judges' own score frequencies would give by chance; the quadratic-weighted
kappa treats FAIL < PARTIAL < PASS as ordered, so PASS vs FAIL costs four times PASS vs PARTIAL.
"""

from __future__ import annotations

from itertools import combinations

import polars as pl

from ..schemas.corpus import PHASES

STAGE = "agreement"
VERSION = 1

ORDER = ("FAIL", "PARTIAL", "PASS")
OVERALL = "OVERALL"


def confusion(pairs: list[tuple[str, str]]) -> list[list[int]]:
    """Counts[i][j]: judge A gave ORDER[i] and judge B gave ORDER[j]."""
    index = {score: i for i, score in enumerate(ORDER)}
    matrix = [[0] * len(ORDER) for _ in ORDER]
    for a, b in pairs:
        matrix[index[a]][index[b]] += 1
    return matrix


def cohen_kappa(matrix: list[list[int]], *, quadratic: bool = False) -> float | None:
    """Cohen's kappa of a square confusion matrix; None when chance agreement is total."""
    k = len(matrix)
    n = sum(map(sum, matrix))
    if not n:
        return None
    rows = [sum(row) / n for row in matrix]
    cols = [sum(matrix[i][j] for i in range(k)) / n for j in range(k)]

    def weight(i: int, j: int) -> float:
        if quadratic:
            return 1 - (i - j) ** 2 / (k - 1) ** 2
        return 1.0 if i == j else 0.0

    observed = sum(weight(i, j) * matrix[i][j] / n for i in range(k) for j in range(k))
    expected = sum(weight(i, j) * rows[i] * cols[j] for i in range(k) for j in range(k))
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


def judge_agreement(judgments: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(agreement table, disagreements) for every pair of judges of every model.

    The agreement table has one row per (model, judge_a, judge_b, phase) and OVERALL with n,
    percent_agreement, kappa, quadratic_kappa and the confusion matrix (rows judge_a, columns
    judge_b, in FAIL, PARTIAL, PASS order); disagreements list each trigger where the two
    scores differ, with both rationales.
    """
    scored = judgments.filter(pl.col("status") == "scored").select(
        "model", "judge", "unique_id_eval", "turn", "sample_index", "phase", "score",
        "rationale")
    keys = ["model", "unique_id_eval", "turn", "sample_index", "phase"]
    rows, disagreements = [], []
    for (model,), by_model in scored.group_by("model", maintain_order=True):
        judges = sorted(by_model["judge"].unique().to_list())
        for judge_a, judge_b in combinations(judges, 2):
            both = (by_model.filter(pl.col("judge") == judge_a).drop("judge")
                    .join(by_model.filter(pl.col("judge") == judge_b).drop("judge"),
                          on=keys, suffix="_b"))
            for phase in PHASES + (OVERALL,):
                part = both if phase == OVERALL else both.filter(pl.col("phase") == phase)
                pairs = list(zip(part["score"].to_list(), part["score_b"].to_list()))
                matrix = confusion(pairs)
                n = len(pairs)
                rows.append({
                    "model": model, "judge_a": judge_a, "judge_b": judge_b, "phase": phase,
                    "n": n,
                    "percent_agreement": sum(a == b for a, b in pairs) / n if n else None,
                    "kappa": cohen_kappa(matrix),
                    "quadratic_kappa": cohen_kappa(matrix, quadratic=True),
                    "confusion": matrix,
                })
            for row in both.filter(pl.col("score") != pl.col("score_b")).iter_rows(named=True):
                disagreements.append({
                    "model": model, "unique_id_eval": row["unique_id_eval"],
                    "turn": row["turn"], "phase": row["phase"],
                    "judge_a": judge_a, "score_a": row["score"], "rationale_a": row["rationale"],
                    "judge_b": judge_b, "score_b": row["score_b"],
                    "rationale_b": row["rationale_b"]})
    table = pl.DataFrame(rows, schema={
        "model": pl.String, "judge_a": pl.String, "judge_b": pl.String, "phase": pl.String,
        "n": pl.Int64, "percent_agreement": pl.Float64, "kappa": pl.Float64,
        "quadratic_kappa": pl.Float64, "confusion": pl.List(pl.List(pl.Int64))})
    return table, pl.DataFrame(disagreements, schema={
        "model": pl.String, "unique_id_eval": pl.String, "turn": pl.Int64, "phase": pl.String,
        "judge_a": pl.String, "score_a": pl.String, "rationale_a": pl.String,
        "judge_b": pl.String, "score_b": pl.String, "rationale_b": pl.String})
