"""Each step's outcome (the package's rules for MCQA, the judge's 0/1 list for OEG) and the
scores per dataset, from the row on which each episode ended."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import polars as pl

from ...providers.chat import ChatOutcome
from ...schemas.arrow import to_frame
from ...config.settings import ModelRole
from . import oeg
from .datasets import DATASETS
from .tables import DatasetScoreRow, OutcomeRow, OutcomeStatus

_CARRIED: dict[str, OutcomeStatus] = {"ok": "scored", "image_error": "image_error",
                                      "environment_crash": "environment_crash",
                                      "refused": "refused"}
"""A step's status -> its outcome's (every failed call: generation_error)."""
_VARIANT = ("model", "judge", "mode", "hint", "reference")


def judgment_row(sample: dict[str, Any], response: dict[str, Any],
                 outcome: ChatOutcome | None, role: ModelRole | None) -> OutcomeRow:
    row: dict[str, Any] = dict(
        dataset=response["dataset"], sample_id=response["sample_id"], step=response["step"],
        sample_index=response["sample_index"], model=response["model"],
        judge=role.model if role is not None else "rules", mode=sample["mode"],
        hint=sample["hint"], reference=sample["reference"], final=response["final"],
        status=_CARRIED.get(response["status"], "generation_error"),
        message=response["message"], stop_reason=response["stop_reason"],
        correct_prediction=response["correct_prediction"], num_turns=response["num_turns"],
        ps=None, cp=None, agg=None, upstream_ps=None, upstream_cp=None, upstream_agg=None,
        judge_output=None, prompt_tokens=None, completion_tokens=None)
    if outcome is None:
        return OutcomeRow(**row)
    row.update(prompt_tokens=outcome.prompt_tokens,
               completion_tokens=outcome.completion_tokens)
    if outcome.final:
        return OutcomeRow(**{**row, "status": "refused", "message": f"judge: {outcome.error}"})
    if not outcome.ok:
        if (outcome.error or "").startswith("invalid judge reply"):
            # Every try gave no usable list: the package reads such a reply as all zeros.
            row.update(upstream_ps=0, upstream_cp=0, upstream_agg=0)
        return OutcomeRow(**{**row, "status": "judge_error", "message": outcome.error})
    visible = oeg.visible_output(outcome.content or "")
    threshold = sample["prediction_thr"]
    verdict = oeg.parse_verdicts(sample["oeg_answers"], visible, threshold)
    ups = oeg.upstream_verdict(sample["upstream_oeg_answers"], visible, threshold)
    row.update(judge_output=visible, upstream_ps=ups[0], upstream_cp=ups[1],
               upstream_agg=ups[2])
    if verdict.status != "ok":  # the package would score it all zeros, silently
        return OutcomeRow(**{**row, "status": "judge_error", "message": verdict.detail})
    return OutcomeRow(**{**row, "ps": verdict.ps, "cp": verdict.cp, "agg": verdict.agg})


def _mean(values: list[float], scale: float = 1.0) -> float | None:
    return scale * sum(values) / len(values) if values else None


def _dataset_row(variant: tuple[Any, ...], dataset: str,
                 ended: list[dict[str, Any]]) -> DatasetScoreRow:
    status = [row["status"] for row in ended]
    mcqa = variant[2] == "mcqa"
    # MCQA: an episode ended on a view without pixels counts as upstream counts it (not
    # correct, its turns so far); a failed call or a crash is counted apart, never scored.
    scored = [row for row in ended if row["status"] in (
        ("scored", "image_error") if mcqa else ("scored",))]
    upstream = [row for row in ended if row["upstream_ps"] is not None]
    return DatasetScoreRow(
        **dict(zip(_VARIANT, variant)), dataset=dataset, samples=len(ended), scored=len(scored),
        acc=_mean([bool(r["correct_prediction"]) for r in scored], 100) if mcqa else None,
        ps=_mean([r["num_turns"] - 1 for r in scored]) if mcqa else
        _mean([r["ps"] for r in scored], 100),
        cp=None if mcqa else _mean([r["cp"] for r in scored], 100),
        agg=None if mcqa else _mean([r["agg"] for r in scored], 100),
        upstream_ps=None if mcqa else _mean([r["upstream_ps"] for r in upstream], 100),
        upstream_cp=None if mcqa else _mean([r["upstream_cp"] for r in upstream], 100),
        upstream_agg=None if mcqa else _mean([r["upstream_agg"] for r in upstream], 100),
        generation_errors=status.count("generation_error"),
        judge_errors=status.count("judge_error"), image_errors=status.count("image_error"),
        environment_crashes=status.count("environment_crash"), refused=status.count("refused"))


def scores(judgments: pl.DataFrame) -> pl.DataFrame:
    """One row per evaluation variant and dataset (the benchmark's order), then 'all' pooling
    every sample; unrounded."""
    ended: dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list))
    for row in judgments.filter(pl.col("final")).iter_rows(named=True):
        ended[tuple(row[name] for name in _VARIANT)][row["dataset"]].append(row)
    rows: list[DatasetScoreRow] = []
    for variant in sorted(ended):
        by_dataset = ended[variant]
        for data in DATASETS:
            if data.short in by_dataset:
                rows.append(_dataset_row(variant, data.short, by_dataset[data.short]))
        rows.append(_dataset_row(variant, "all", [r for rs in by_dataset.values() for r in rs]))
    return to_frame(rows, DatasetScoreRow)
