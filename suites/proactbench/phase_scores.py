"""phase_scores: PASS/PARTIAL/FAIL counts, rates and weighted score per phase and overall."""

from __future__ import annotations

import polars as pl

from ...schemas.arrow import arrow_schema, frame_of
from .corpus import PHASES
from .tables import PhaseScoreRow

STAGE = "phase_scores"
VERSION = 4

OVERALL = "OVERALL"


def _counts(grouped: pl.DataFrame | pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    status, score = pl.col("status"), pl.col("score")
    return (
        grouped.lazy().group_by(keys).agg(
            pl.len().alias("triggers"),
            (score == "PASS").sum().alias("pass"),
            (score == "PARTIAL").sum().alias("partial"),
            (score == "FAIL").sum().alias("fail"),
            (status == "skipped").sum().alias("skipped"),
            (status == "unevaluable").sum().alias("unevaluable"),
            (status == "generation_error").sum().alias("generation_errors"),
            (status == "judge_error").sum().alias("judge_errors"),
            (status == "empty_response").sum().alias("empty_responses"),
            (status == "truncated_response").sum().alias("truncated_responses"),
            (status == "blocked_response").sum().alias("blocked_responses"),
            (status == "refused").sum().alias("refused"),
        )
    )


def score_phases(judgments: pl.DataFrame) -> pl.DataFrame:
    """Per (model, judge, phase) and OVERALL. Overall pools all triggers; it is not the mean of
    the phase scores. Rates are null where nothing was evaluated, never a placeholder."""
    keys = ["model", "judge", "judge_prompt_sha256"]
    per_phase = _counts(judgments, keys + ["phase"])
    overall = _counts(judgments, keys).with_columns(phase=pl.lit(OVERALL))
    order = {phase: rank for rank, phase in enumerate(PHASES + (OVERALL,))}
    evaluated = pl.col("pass") + pl.col("partial") + pl.col("fail")
    rate = lambda numerator: pl.when(evaluated > 0).then(numerator / evaluated)  # noqa: E731
    table = (
        pl.concat([per_phase, overall.select(per_phase.collect_schema().names())])
        .with_columns(evaluated=evaluated)
        .with_columns(
            not_evaluated=pl.col("triggers") - pl.col("evaluated"),
            pass_rate=rate(pl.col("pass")),
            partial_rate=rate(pl.col("partial")),
            weighted_score=rate(pl.col("pass") + 0.5 * pl.col("partial")),
        )
        .with_columns(_order=pl.col("phase").replace_strict(order, default=len(order)))
        .sort(*keys, "_order")
        .collect()
    )
    schema = arrow_schema(PhaseScoreRow)
    return frame_of(table.select(schema.names).to_arrow().cast(schema))


def score_triggers(judgments: pl.DataFrame) -> pl.DataFrame:
    """Per trigger, over its samples: how many were scored, the mean score (PASS 1, PARTIAL 0.5,
    FAIL 0) and its sample variance (null with fewer than two scored samples)."""
    value = pl.col("score").replace_strict({"PASS": 1.0, "PARTIAL": 0.5, "FAIL": 0.0},
                                           default=None, return_dtype=pl.Float64)
    return (judgments.filter(pl.col("status") == "scored")
            .group_by("model", "judge", "unique_id_eval", "turn", "phase")
            .agg(samples_scored=pl.len(), mean_score=value.mean(), variance=value.var(ddof=1))
            .sort("model", "judge", "unique_id_eval", "turn"))
