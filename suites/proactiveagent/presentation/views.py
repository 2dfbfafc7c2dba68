"""What the viewer shows of a trace (suites/base.py `sample_views`): its events in order, each
with the model's proposal (or none), the reward model's verdict and thought, the gold label
that verdict makes (whether help was wanted) and the cell of the confusion matrix."""

from __future__ import annotations

from typing import Any, Iterator

from ....cache.artifacts import ArtifactStore
from ...declarations import SampleView, ViewColumn, ViewSpec
from ...views import Viewed, evaluation_tables, facts, table

OUTCOMES = {"all right": "good", "FP": "mid", "FN": "mid", "FN+FP": "bad", "not scored": "none",
            "TP": "good", "TN": "good"}
"""A trace's outcome (its events' cells: all TP or TN, some FP, some FN, both, or an event
not scored), and each event's cell."""
SPEC = ViewSpec((ViewColumn("trace", "26%"), ViewColumn("events", "50px"),
                 ViewColumn("split", "110px", filter=True)), outcome_name="outcome",
                outcomes=OUTCOMES)


def cell(proposed: bool | None, accepted: bool | None) -> str | None:
    """TP, FP, TN or FN as upstream counts them (an accepted null proposal is a TN)."""
    if proposed is None or accepted is None:
        return None
    return ("T" if accepted else "F") + ("P" if proposed else "N")


def _trace_outcome(cells: list[str | None]) -> str:
    if any(c is None for c in cells):
        return "not scored"
    wrong = {c for c in cells if c in ("FP", "FN")}
    return "+".join(sorted(wrong)) if wrong else "all right"


def sample_views(suite: Viewed, store: ArtifactStore, judgments_key: str
                ) -> Iterator[SampleView]:
    samples, responses, verdicts = evaluation_tables(suite, store, judgments_key)
    events = {(r["trace"], r["event_index"]): r for r in samples.iter_rows(named=True)}
    replies = {(r["trace"], r["event_index"], r["sample_index"]): r
               for r in responses.iter_rows(named=True)}
    for (trace, sample_index), rows in verdicts.sort("trace", "sample_index", "event_index") \
            .group_by("trace", "sample_index", maintain_order=True):
        lines: list[list[Any]] = []
        cells: list[str | None] = []
        marked: list[int] = []
        for verdict in rows.iter_rows(named=True):
            at = verdict["event_index"]
            event: dict[str, Any] = events.get((trace, at)) or {}
            reply: dict[str, Any] = replies.get((trace, at, sample_index)) or {}
            scored = verdict["status"] == "scored"
            found = cell(verdict["proposed"], verdict["accepted"]) if scored else None
            cells.append(found)
            if found in ("FP", "FN"):
                marked.append(len(lines))
            wanted = None if not scored else (verdict["proposed"] == verdict["accepted"])
            lines.append([
                at, event.get("event"), reply.get("proposed_task") or "(none)",
                None if verdict["accepted"] is None else
                ("accepted" if verdict["accepted"] else "rejected"),
                verdict["thought"], None if wanted is None else
                ("help wanted" if wanted else "no help wanted"),
                {"badge": found or verdict["status"]}])
        first = rows.row(0, named=True)
        yield SampleView(
            sample=str(trace), sample_index=int(sample_index),
            cells=(str(trace), str(rows.height), ", ".join(first["splits"] or [])),
            outcome=_trace_outcome(cells),
            shared=[facts(("events", rows.height),
                          ("task_status", (events.get((trace, 0)) or {}).get("task_status")))],
            result=[facts(*((name, cells.count(name)) for name in ("TP", "FP", "TN", "FN")),
                          ("not scored", cells.count(None))),
                    table(["event", "what the user did", "proposal", "verdict",
                           "reward model's thought", "gold", ""], lines, marked)])
