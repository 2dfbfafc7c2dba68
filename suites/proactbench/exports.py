"""Files for people and for comparison with upstream: phase_scores.csv/.parquet,
results.jsonl (upstream's per-dialogue results shape) and metrics.json (upstream's metrics keys).

Upstream only knows PASS/PARTIAL/FAIL/SKIPPED; here every trigger that was not scored (judge
skipped, no user message, failed generation, failed judge) is SKIPPED in those files, so counts
add up to the corpus, and the reason is kept next to it under a `proactflow` key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from ...cache.artifacts import write_atomic, write_parquet_atomic
from .corpus import PHASES
from .phase_scores import score_triggers

_COUNT_KEYS = ("PASS", "PARTIAL", "FAIL", "SKIPPED")


def _trigger_stats(judged: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    stats = {phase: dict.fromkeys(_COUNT_KEYS, 0) for phase in PHASES}
    for row in judged:
        label = row["score"] if row["status"] == "scored" else "SKIPPED"
        stats[row["phase"]][label] += 1
    return stats


def _evaluation_result(row: dict[str, Any]) -> dict[str, Any]:
    if row["status"] in ("scored", "skipped"):
        return {"status": "EVALUATED" if row["status"] == "scored" else "SKIPPED",
                "score": row["score"], "rationale": row["rationale"] or "",
                "evidence": row["evidence"] or ""}
    return {"status": "SKIPPED", "score": None, "rationale": row["message"] or "",
            "evidence": "", "not_evaluated_reason": row["status"]}


def _usage(rows: list[dict[str, Any]]) -> dict[str, int]:
    called = [r for r in rows if r["prompt_tokens"] is not None]
    return {"prompt_tokens": sum(r["prompt_tokens"] for r in called),
            "completion_tokens": sum(r["completion_tokens"] or 0 for r in called),
            "calls": len(called)}


def results_rows(triggers: pl.DataFrame, responses: pl.DataFrame,
                 judgments: pl.DataFrame) -> list[dict[str, Any]]:
    """One upstream-shaped results row per dialogue, in corpus order: upstream's shape holds one
    response per trigger, so with several samples each row holds the first (`sample_index` 0,
    stated in every row)."""
    keys = ["unique_id_eval", "turn"]
    first = pl.col("sample_index") == 0
    joined = (
        triggers.join(responses.filter(first).select(
            *keys, "model", pl.col("response"), pl.col("prompt_tokens").alias("gen_prompt"),
            pl.col("completion_tokens").alias("gen_completion")), on=keys, how="left")
        .join(judgments.filter(first).select(
            *keys, "judge", "judge_prompt_sha256", "status", "score", "rationale", "evidence",
            "message",
            "prompt_tokens", "completion_tokens"), on=keys, how="left")
        .sort("dialogue_index", "turn")
    )
    out = []
    for (uid,), group in joined.group_by("unique_id_eval", maintain_order=True):
        rows = group.to_dicts()
        head = rows[0]
        out.append({
            "unique_id_eval": uid,
            "blueprint_id": head["blueprint_id"],
            "scenario_id": head["scenario_id"],
            "uuid": head["uuid"],
            "category_key": head["category_key"],
            "style_combination_index": head["style_combination_index"],
            "evaluated_model": head["model"],
            "source_evaluated_model": head["source_evaluated_model"],
            "num_trigger_points": len(rows),
            "trigger_stats": _trigger_stats(rows),
            "trigger_points": [{"turn": r["turn"], "evaluation_rubric": r["rubric"],
                                "evaluation_result": _evaluation_result(r)} for r in rows],
            "turn_records": [{"turn": r["turn"], "user_message": r["user_message"],
                              "assistant_response": r["response"],
                              "original_assistant_response": r["curation_response"]}
                             for r in rows],
            "token_usage": {
                "assistant": _usage([{"prompt_tokens": r["gen_prompt"],
                                      "completion_tokens": r["gen_completion"]} for r in rows]),
                "judge": _usage(rows),
            },
            "judge_model": head["judge"],
            "judge_prompt_sha256": head["judge_prompt_sha256"],
            "sample_index": 0,
        })
    return out


def metric_values(aggregate: dict[str, dict[str, int]], *, dialogues: int
                  ) -> dict[str, float | None]:
    """Upstream's `metrics` block from per-phase counts of PASS, PARTIAL, FAIL and SKIPPED."""
    metrics: dict[str, float | None] = {}

    def rates(counts: dict[str, int]) -> tuple[float | None, float | None, float | None]:
        evaluated = counts["PASS"] + counts["PARTIAL"] + counts["FAIL"]
        if not evaluated:
            return None, None, None
        return (counts["PASS"] / evaluated, counts["PARTIAL"] / evaluated,
                (counts["PASS"] + 0.5 * counts["PARTIAL"]) / evaluated)

    for phase in PHASES:
        pass_rate, partial_rate, weighted = rates(aggregate[phase])
        name = phase.lower()
        metrics[f"eval/proactivity_{name}_pass_rate"] = pass_rate
        metrics[f"eval/proactivity_{name}_partial_rate"] = partial_rate
        metrics[f"eval/proactivity_{name}_weighted_score"] = weighted
        metrics[f"eval/proactivity_{name}_total"] = float(sum(aggregate[phase].values()))
    overall = {label: sum(aggregate[p][label] for p in PHASES) for label in _COUNT_KEYS}
    pass_rate, _, weighted = rates(overall)
    metrics["eval/proactivity_overall_pass_rate"] = pass_rate
    metrics["eval/proactivity_overall_weighted_score"] = weighted
    metrics["eval/proactivity_total_dialogues"] = float(dialogues)
    return metrics


def upstream_metrics(results: list[dict[str, Any]], scores: pl.DataFrame,
                     judgments: pl.DataFrame, responses: pl.DataFrame) -> dict[str, Any]:
    """metrics.json with upstream's keys; plus what upstream lacks (reasons for SKIPPED, what the
    counts are over) under `proactflow`.

    The counts, rates and token totals pool every sample of every trigger, exactly as
    phase_scores.csv and the leaderboard do (with one sample, one row per trigger);
    `results` (results.jsonl, upstream's one-response shape) only gives the dialogue count.
    """
    aggregate = {phase: dict.fromkeys(_COUNT_KEYS, 0) for phase in PHASES}
    labels = judgments.select("phase", pl.when(pl.col("status") == "scored")
                              .then(pl.col("score")).otherwise(pl.lit("SKIPPED")).alias("label"))
    for phase, label, count in labels.group_by("phase", "label").len().rows():
        aggregate[phase][label] += count
    metrics = metric_values(aggregate, dialogues=len(results))

    def usage(frame: pl.DataFrame) -> dict[str, float]:
        called = frame.filter(pl.col("prompt_tokens").is_not_null())
        prompt = int(called["prompt_tokens"].sum())
        completion = int(called["completion_tokens"].fill_null(0).sum())
        n = max(1, len(results))
        return {"mean_prompt_tokens_per_conversation": prompt / n,
                "mean_completion_tokens_per_conversation": completion / n,
                "mean_calls_per_conversation": called.height / n,
                "total_prompt_tokens": prompt, "total_completion_tokens": completion}

    not_evaluated = {
        row["phase"]: {k: row[k] for k in ("skipped", "unevaluable", "generation_errors",
                                            "judge_errors", "empty_responses",
                                            "truncated_responses", "blocked_responses")}
        for row in scores.to_dicts()}
    samples = int(judgments.select(pl.col("sample_index").max()).item() or 0) + 1
    return {"aggregate_trigger_stats": aggregate, "metrics": metrics,
            "token_usage": {"assistant": usage(responses), "judge": usage(judgments)},
            "proactflow": {"not_evaluated": not_evaluated, "samples": {
                "per_trigger": samples,
                "counts_and_rates": "every sample of every trigger pooled, as in "
                                    "phase_scores.csv (with one sample: one per trigger)",
                "results_jsonl": "the first sample (sample_index 0) of each trigger"}}}


def _write_text(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))


def write_outputs(out_dir: Path, triggers: pl.DataFrame, responses: pl.DataFrame,
                  judgments: pl.DataFrame, scores: pl.DataFrame,
                  provenance: dict[str, Any]) -> dict[str, str]:
    """Write the export files; returns their paths by name."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results = results_rows(triggers, responses, judgments)
    metrics = upstream_metrics(results, scores, judgments, responses)
    metrics["proactflow"].update(provenance)
    paths = {name: out_dir / name for name in
             ("phase_scores.csv", "phase_scores.parquet", "results.jsonl", "metrics.json")}
    # An undefined rate (nothing evaluated) is "-", as the console prints it.
    _write_text(paths["phase_scores.csv"], scores.write_csv(null_value="-"))
    write_parquet_atomic(paths["phase_scores.parquet"], scores)
    _write_text(paths["results.jsonl"], "".join(
        json.dumps(row, ensure_ascii=False) + "\n" for row in results))
    if int(judgments.select(pl.col("sample_index").max()).item() or 0) > 0:
        per_trigger = score_triggers(judgments)
        paths["trigger_scores.csv"] = out_dir / "trigger_scores.csv"
        _write_text(paths["trigger_scores.csv"], per_trigger.write_csv())
        metrics["proactflow"]["mean_variance_across_samples"] = per_trigger["variance"].mean()
    _write_text(paths["metrics.json"], json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")
    return {name: str(path) for name, path in paths.items()}
