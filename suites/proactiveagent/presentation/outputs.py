"""Export files of a ProactiveBench run: metrics.csv with upstream's columns computed as upstream's
scripts compute them (comparable with the published results files: an event whose every attempt
failed counts as a proposal of "candidate_task"), split_scores.csv with the strict counts (failed
events left out, counted apart), what was not scored and the intervals, events.csv with every
event's proposal and verdict (a failed event's verdict marked `judged_candidate_task`), and
metrics.json with both views and the provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from ....cache.artifacts import write_atomic
from ..scoring import upstream_rows

_EVENT_COLUMNS = ("trace", "event_index", "sample_index", "time", "event", "task_status",
                  "status", "proposed_task", "judged_candidate_task", "accepted", "thought",
                  "message", "response")


def events_table(samples: pl.DataFrame, responses: pl.DataFrame,
                 judgments: pl.DataFrame) -> pl.DataFrame:
    """One row per (event, sample): what happened, what the agent proposed, the verdict."""
    keys = ["trace", "event_index"]
    return (responses.select(*keys, "sample_index", "proposed_task", "response")
            .join(judgments.select(*keys, "sample_index", "status", "judged_candidate_task",
                                   "accepted", "thought", "message"),
                  on=[*keys, "sample_index"], how="left")
            .join(samples.select(*keys, "time", "event", "task_status"), on=keys, how="left")
            .sort(*keys, "sample_index").select(_EVENT_COLUMNS))


_RATES = ("recall", "precision", "accuracy", "false_alarm", "f1", "accept_rate", "f1_ci_low",
          "f1_ci_high", "accuracy_ci_low", "accuracy_ci_high")


def split_scores_csv(scores: pl.DataFrame) -> bytes:
    """split_scores.csv as the console shows it: a split with nothing scored has no rates
    (upstream's formula gives 0.0 for 0/0), so they are "-", as are the intervals."""
    undefined = pl.col("scored") == 0
    shown = scores.with_columns(
        pl.when(undefined).then(None).otherwise(pl.col(name)).alias(name)
        for name in _RATES if name in scores.columns)
    return shown.write_csv(null_value="-").encode()


def write_outputs(out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                  judgments: pl.DataFrame, scores: pl.DataFrame,
                  provenance: dict[str, Any]) -> dict[str, str]:
    out.mkdir(parents=True, exist_ok=True)
    paths = {name: out / name for name in
             ("split_scores.csv", "events.csv", "metrics.json", "metrics.csv")}
    write_atomic(paths["split_scores.csv"], split_scores_csv(scores))
    write_atomic(paths["events.csv"],
                 events_table(samples, responses, judgments).write_csv().encode())
    metrics = {"metrics": upstream_rows(scores), "splits": scores.to_dicts(),
               "failed_events": {row["split"]: row["failed_events"]
                                 for row in scores.iter_rows(named=True)},
               "note": "metrics: upstream's view (each failed event a proposal of "
                       "\"candidate_task\", judged); splits: the strict view (failed events "
                       "left out of the counts, failed_events says how many)",
               "proactflow": provenance}
    write_atomic(paths["metrics.json"],
                 (json.dumps(metrics, indent=2, ensure_ascii=False) + "\n").encode())
    write_atomic(paths["metrics.csv"], pl.DataFrame(upstream_rows(scores)).write_csv().encode())
    return {name: str(path) for name, path in paths.items()}
