"""agreement: how far two judges agree on the same responses, per phase and overall.

Only triggers that both judges scored count. Cohen's kappa corrects percent agreement for the
agreement the two judges' own score frequencies would give by chance; the quadratic-weighted
kappa treats FAIL < PARTIAL < PASS as ordered, so PASS vs FAIL costs four times PASS vs PARTIAL.
"""

from __future__ import annotations

from itertools import combinations

import polars as pl

from .corpus import PHASES

STAGE = "agreement"
VERSION = 2

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


def _sides(judgments: pl.DataFrame) -> pl.DataFrame:
    """Judgments with the identity of each side: its evaluation and the responses it judged.
    Frames without them (one run's judgments) are one evaluation per judge and prompt, and
    responses per model."""
    if "evaluation" not in judgments.columns:
        prompt = ["judge_prompt_sha256"] if "judge_prompt_sha256" in judgments.columns else []
        judgments = judgments.with_columns(
            evaluation=pl.concat_str("judge", *prompt, separator="|"), label=pl.col("judge"))
    if "responses" not in judgments.columns:
        judgments = judgments.with_columns(responses=pl.col("model"))
    return judgments


def judge_agreement(judgments: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(agreement table, disagreements) for every pair of evaluations that judged the same
    responses (never two judgments of different responses, never one judge's two prompts
    pooled).

    The agreement table has one row per (model, judge_a, judge_b, phase) and OVERALL with n,
    percent_agreement, kappa, quadratic_kappa and the confusion matrix (rows judge_a, columns
    judge_b, in FAIL, PARTIAL, PASS order), plus the two sides' labels and evaluation keys;
    disagreements list each trigger where the two scores differ, with both rationales.
    """
    scored = _sides(judgments).filter(pl.col("status") == "scored").select(
        "model", "judge", "evaluation", "label", "responses", "unique_id_eval", "turn",
        "sample_index", "phase", "score", "rationale")
    keys = ["unique_id_eval", "turn", "sample_index", "phase"]
    rows, disagreements = [], []
    for (_,), same_responses in scored.group_by("responses", maintain_order=True):
        sides = same_responses.select("evaluation", "label", "judge", "model").unique(
            "evaluation").sort("label", "evaluation").rows()
        for (key_a, label_a, judge_a, model), (key_b, label_b, judge_b, _) in \
                combinations(sides, 2):
            both = (same_responses.filter(pl.col("evaluation") == key_a).select(
                        *keys, "score", "rationale")
                    .join(same_responses.filter(pl.col("evaluation") == key_b).select(
                        *keys, "score", "rationale"), on=keys, suffix="_b"))
            identity = {"model": model, "judge_a": judge_a, "judge_b": judge_b}
            for phase in PHASES + (OVERALL,):
                part = both if phase == OVERALL else both.filter(pl.col("phase") == phase)
                pairs = list(zip(part["score"].to_list(), part["score_b"].to_list()))
                matrix = confusion(pairs)
                n = len(pairs)
                rows.append({
                    **identity, "phase": phase, "n": n,
                    "percent_agreement": sum(a == b for a, b in pairs) / n if n else None,
                    "kappa": cohen_kappa(matrix),
                    "quadratic_kappa": cohen_kappa(matrix, quadratic=True),
                    "confusion": matrix, "label_a": label_a, "label_b": label_b,
                    "evaluation_a": key_a, "evaluation_b": key_b,
                })
            for row in both.filter(pl.col("score") != pl.col("score_b")).iter_rows(named=True):
                disagreements.append({
                    "model": model, "unique_id_eval": row["unique_id_eval"],
                    "turn": row["turn"], "phase": row["phase"],
                    "judge_a": judge_a, "score_a": row["score"], "rationale_a": row["rationale"],
                    "judge_b": judge_b, "score_b": row["score_b"],
                    "rationale_b": row["rationale_b"], "label_a": label_a, "label_b": label_b})
    table = pl.DataFrame(rows, schema={
        "model": pl.String, "judge_a": pl.String, "judge_b": pl.String, "phase": pl.String,
        "n": pl.Int64, "percent_agreement": pl.Float64, "kappa": pl.Float64,
        "quadratic_kappa": pl.Float64, "confusion": pl.List(pl.List(pl.Int64)),
        "label_a": pl.String, "label_b": pl.String, "evaluation_a": pl.String,
        "evaluation_b": pl.String})
    return table, pl.DataFrame(disagreements, schema={
        "model": pl.String, "unique_id_eval": pl.String, "turn": pl.Int64, "phase": pl.String,
        "judge_a": pl.String, "score_a": pl.String, "rationale_a": pl.String,
        "judge_b": pl.String, "score_b": pl.String, "rationale_b": pl.String,
        "label_a": pl.String, "label_b": pl.String})
