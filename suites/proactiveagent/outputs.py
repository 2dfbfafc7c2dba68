"""Export files of a ProactiveBench run: metrics.csv with upstream's columns (comparable with the
published results files), split_scores.csv with the counts, what was not scored and the
intervals, events.csv with every event's proposal and verdict, and metrics.json with the
provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from ...cache.artifacts import write_atomic
from .scoring import upstream_rows

_EVENT_COLUMNS = ("trace", "event_index", "sample_index", "time", "event", "task_status",
                  "status", "proposed_task", "accepted", "thought", "message", "response")


def events_table(samples: pl.DataFrame, responses: pl.DataFrame,
                 judgments: pl.DataFrame) -> pl.DataFrame:
    """One row per (event, sample): what happened, what the agent proposed, the verdict."""
    keys = ["trace", "event_index"]
    return (responses.select(*keys, "sample_index", "proposed_task", "response")
            .join(judgments.select(*keys, "sample_index", "status", "accepted", "thought",
                                   "message"), on=[*keys, "sample_index"], how="left")
            .join(samples.select(*keys, "time", "event", "task_status"), on=keys, how="left")
            .sort(*keys, "sample_index").select(_EVENT_COLUMNS))


def write_outputs(out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                  judgments: pl.DataFrame, scores: pl.DataFrame,
                  provenance: dict[str, Any]) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in
             ("split_scores.csv", "events.csv", "metrics.json", "metrics.csv")}
    write_atomic(paths["split_scores.csv"], scores.write_csv().encode())
    write_atomic(paths["events.csv"],
                 events_table(samples, responses, judgments).write_csv().encode())
    metrics = {"metrics": upstream_rows(scores), "splits": scores.to_dicts(),
               "proactflow": provenance}
    write_atomic(paths["metrics.json"],
                 (json.dumps(metrics, indent=2, ensure_ascii=False) + "\n").encode())
    write_atomic(paths["metrics.csv"], pl.DataFrame(upstream_rows(scores)).write_csv().encode())
    return {name: str(path) for name, path in paths.items()}
