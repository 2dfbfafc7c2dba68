"""Export files of a run: metrics.csv (one row per dataset, the package's figures unrounded
plus error counts), samples.csv (one row per sample), steps.csv (one row per step) and
metrics.json (all of it with the provenance)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from ....cache.artifacts import write_atomic

MCQA_METRICS = ("dataset", "samples", "acc", "ps", "scored", "generation_errors",
                "image_errors", "environment_crashes", "refused")
OEG_METRICS = ("dataset", "samples", "ps", "cp", "agg", "scored", "judge_errors",
               "generation_errors", "environment_crashes", "refused", "upstream_ps",
               "upstream_cp", "upstream_agg")
SAMPLE_COLUMNS = ("dataset", "sample_id", "correct_prediction", "num_turns", "stop_reason",
                  "status", "message")
OEG_SAMPLE_COLUMNS = ("dataset", "sample_id", "stop_reason", "status", "message", "ps", "cp",
                      "agg", "upstream_ps", "upstream_cp", "upstream_agg", "response",
                      "judge_output")
STEP_COLUMNS = ("dataset", "sample_id", "step", "sample_index", "status", "image",
                "image_sha256", "crop", "options", "response", "action_evaluation",
                "category_evaluation", "final", "stop_reason", "message", "prompt_tokens",
                "completion_tokens")


def metrics_table(scores: pl.DataFrame) -> pl.DataFrame:
    """The mode's columns, then `variant` ("mcqa", "mcqa hint", "mcqa reference", "oeg", "oeg
    hint"): the file says which variant it scores."""
    mode = scores["mode"][0] if scores.height else "mcqa"
    if "refused" not in scores.columns:  # scores stored before the column was added
        scores = scores.with_columns(refused=pl.lit(0, pl.Int64))
    variant = pl.concat_str(
        "mode", pl.when(pl.col("hint")).then(pl.lit(" hint")).otherwise(pl.lit("")),
        pl.when(pl.col("reference")).then(pl.lit(" reference")).otherwise(pl.lit("")))
    return scores.select(*(MCQA_METRICS if mode == "mcqa" else OEG_METRICS),
                         variant.alias("variant"))


def samples_table(responses: pl.DataFrame, judgments: pl.DataFrame) -> pl.DataFrame:
    """The row on which each sample's episode ended."""
    keys = ["dataset", "sample_id", "sample_index", "step"]
    ended = judgments.filter(pl.col("final")).join(
        responses.select(*keys, "response"), on=keys, how="left")
    mode = judgments["mode"][0] if judgments.height else "mcqa"
    columns = SAMPLE_COLUMNS if mode == "mcqa" else OEG_SAMPLE_COLUMNS
    return ended.select(columns)


def steps_table(responses: pl.DataFrame) -> pl.DataFrame:
    listed = [pl.col(name).list.eval(pl.element().cast(pl.String)).list.join(" | ")
              .alias(name) for name in ("options", "crop")]
    return responses.with_columns(listed).select(STEP_COLUMNS)


def write_outputs(out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                  judgments: pl.DataFrame, scores: pl.DataFrame,
                  provenance: dict[str, Any]) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    tables = {"metrics.csv": metrics_table(scores),
              "samples.csv": samples_table(responses, judgments),
              "steps.csv": steps_table(responses)}
    paths = {name: out / name for name in (*tables, "metrics.json")}
    for name, table in tables.items():
        # metrics.csv: an undefined figure (nothing scored) is "-", as the console prints it.
        null = "-" if name == "metrics.csv" else ""
        write_atomic(paths[name], table.write_csv(null_value=null).encode())
    metrics = {"metrics": tables["metrics.csv"].to_dicts(), "scores": scores.to_dicts(),
               "proactflow": provenance}
    write_atomic(paths["metrics.json"],
                 (json.dumps(metrics, indent=2, ensure_ascii=False) + "\n").encode())
    return {name: str(path) for name, path in paths.items()}


def headline_rows(board: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The sweep summary: one row per evaluation, on every sample pooled, best first: its
    variant, headline figure (MCQA acc, OEG agg) with its interval and rank range, and only the
    columns its modes fill."""
    def cell(value: Any) -> str:
        return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)

    pooled = board.filter(pl.col("dataset") == "all")
    modes = set(pooled["mode"].to_list())
    figure = "acc" if modes == {"mcqa"} else "agg" if modes == {"oeg"} else "acc/agg"
    has_interval = "ci_low" in pooled.columns
    columns = ["model", "judge", "variant" if "variant" in pooled.columns else "mode", figure,
               *(["95 % CI", "rank"] if has_interval else []), "ps",
               *(["cp"] if "oeg" in modes else []), "scored", "samples"]
    rows = []
    for row in pooled.sort(pl.coalesce("acc", "agg"), descending=True,
                           nulls_last=True).iter_rows(named=True):
        value = row["acc"] if row["mode"] == "mcqa" else row["agg"]
        rows.append([row["model"], row["judge"], row.get("variant") or row["mode"], cell(value),
                     *([f"{cell(row['ci_low'])}-{cell(row['ci_high'])}", row["rank"]]
                       if has_interval else []), cell(row["ps"]),
                     *([cell(row["cp"])] if "oeg" in modes else []), cell(row["scored"]),
                     cell(row["samples"])])
    return columns, rows
