"""PAUC per part from the turns table, and a run's export files.

Scores: for each (model, judge), one row per part and one for all parts (every turn of the run),
the turn-weighted mean x 100 at omega 0, 0.5 and 1 with 95 % bootstrap intervals resampling
samples (pauc.part_metrics), the turns lost by kind, and the time-agnostic view (each scored
turn's final in-window score).

Exports: metrics.csv (`part, turns, pauc_0, pauc_0.5, pauc_1`: the issue's contract, then
`refused`, as every suite's console table and CSV have it; a row per part, then `all`),
metrics.json (every score column and the run's provenance), turns.csv (one row per gold turn),
samples.csv (one row per sample and rollout) and steps.csv (every step's output).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from ...cache.artifacts import write_atomic
from ...schemas.arrow import to_frame
from .pauc import OMEGAS, TurnResult, TurnScore, omega_column, part_metrics
from .tables import PartScoreRow

ALL_PARTS = "all"
METRICS_COLUMNS = ["part", "turns", *(omega_column(omega) for omega in OMEGAS), "refused"]


def _turn_result(row: dict[str, Any], part: str) -> TurnResult:
    scored = row["status"] == "scored"
    pauc = {omega: row[omega_column(omega)] for omega in OMEGAS} if scored else {}
    # The bootstrap's unit is the sample (its turns share one chat): rollouts stay apart.
    unit = f"{row['part']}/{row['question_id']}#{row['sample_index']}"
    return TurnResult(part, unit, TurnScore(row["status"], pauc, row["judged"],
                                            row["final_score"], row["late_lower_deleted"]))


def score_parts(judgments: pl.DataFrame, *, seed: int = 0) -> pl.DataFrame:
    rows: list[PartScoreRow] = []
    for (model, judge), group in sorted(judgments.group_by("model", "judge"),
                                        key=lambda item: tuple(map(str, item[0]))):
        turns = group.to_dicts()
        results = [_turn_result(row, row["part"]) for row in turns]
        results += [_turn_result(row, ALL_PARTS) for row in turns]
        for metrics in part_metrics(results, seed=seed):
            rows.append(PartScoreRow.model_validate({"model": model, "judge": judge,
                                                     **metrics}))
    order = {part: n for n, part in enumerate(("WEB", "EGO", "TV", "VAD", ALL_PARTS))}
    frame = to_frame(rows, PartScoreRow)
    return frame.sort("model", "judge", pl.col("part").replace_strict(
        order, default=len(order), return_dtype=pl.Int64))


def _json_lists(frame: pl.DataFrame) -> pl.DataFrame:
    """CSV has no lists: list columns as JSON text."""
    return frame.with_columns(
        pl.col(name).map_elements(lambda value: json.dumps(list(value)),
                                  return_dtype=pl.String)
        for name, dtype in frame.schema.items() if isinstance(dtype, pl.List))


def samples_table(samples: pl.DataFrame, responses: pl.DataFrame,
                  judgments: pl.DataFrame) -> pl.DataFrame:
    """One row per (sample, rollout): steps answered, replies (not silence), gold turns, scored
    turns and the mean of their PAUC at each omega."""
    key = ["part", "question_id"]
    steps = responses.group_by(*key, "sample_index").agg(
        steps_answered=(pl.col("status") == "ok").sum().cast(pl.Int64),
        replies=(pl.col("silent") == False).sum().cast(pl.Int64))  # noqa: E712
    turns = judgments.group_by(*key, "sample_index").agg(
        gold_turns=pl.len().cast(pl.Int64),
        scored=(pl.col("status") == "scored").sum().cast(pl.Int64),
        *(pl.col(omega_column(omega)).mean().alias(omega_column(omega)) for omega in OMEGAS))
    return (samples.select(*key, "video", "duration", "steps")
            .join(steps, on=key, how="left").join(turns, on=[*key, "sample_index"], how="left")
            .sort(*key, "sample_index"))


def write_outputs(out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                  judgments: pl.DataFrame, scores: pl.DataFrame,
                  provenance: dict[str, Any]) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    names = ("metrics.csv", "metrics.json", "turns.csv", "samples.csv", "steps.csv")
    paths = {name: out / name for name in names}
    # Every part, then `all` (every turn of the run), as the console table and metrics.json.
    if "refused" not in scores.columns:  # scores stored before the column was added
        scores = scores.with_columns(refused=pl.lit(0, pl.Int64))
    # An undefined PAUC (no turn scored) is "-", as the console prints it.
    write_atomic(paths["metrics.csv"],
                 scores.select(METRICS_COLUMNS).write_csv(null_value="-").encode())
    metrics = {"parts": scores.to_dicts(), "proactflow": provenance}
    write_atomic(paths["metrics.json"], (json.dumps(metrics, indent=2, ensure_ascii=False)
                                         + "\n").encode())
    write_atomic(paths["turns.csv"], _json_lists(judgments).write_csv().encode())
    write_atomic(paths["samples.csv"],
                 samples_table(samples, responses, judgments).write_csv().encode())
    write_atomic(paths["steps.csv"], _json_lists(responses).write_csv().encode())
    return {name: str(path) for name, path in paths.items()}
