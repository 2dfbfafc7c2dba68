"""Blocks the viewer draws (results/viewer/script.py), built by the suites' `sample_views`:
`{"t": "text", "label", "text"}`, `{"t": "facts", "items": [[name, value], ...]}`,
`{"t": "table", "head": [...], "rows": [[cell, ...], ...], "marked": [row, ...]}` (a cell is a
value, `{"img": file, "title": text}`, `{"imgs": [...]}` or `{"badge": outcome}`),
`{"t": "image", "src": file, "caption": text}` and `{"t": "h", "text"}`. Files are names under
the viewer's `media/` folder. Also the default views: a sample's judgments rows as a table."""

from __future__ import annotations

import json
from typing import Any, Iterator, Protocol

import polars as pl

from ..cache.artifacts import ArtifactStore
from .declarations import SampleView, StageNames


class Viewed(Protocol):
    """What the views below need of a suite (suites/base.py `Suite`)."""

    @property
    def stages(self) -> StageNames: ...

    @property
    def sample_key(self) -> tuple[str, ...]: ...

    @property
    def group_column(self) -> str: ...


def shown(value: Any) -> Any:
    """A value as the viewer's JSON holds it: plain values as they are, others as JSON text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def text(label: str, value: Any) -> dict[str, Any]:
    return {"t": "text", "label": label, "text": None if value is None else str(value)}


def facts(*items: tuple[str, Any]) -> dict[str, Any]:
    return {"t": "facts", "items": [[name, shown(value)] for name, value in items
                                    if value is not None]}


def table(head: list[str], rows: list[list[Any]], marked: list[int] | None = None
          ) -> dict[str, Any]:
    return {"t": "table", "head": head, "rows": rows, "marked": marked or []}


def heading(value: str) -> dict[str, Any]:
    return {"t": "h", "text": value}


def judgments_table_views(suite: Viewed, store: ArtifactStore, judgments_key: str
                          ) -> Iterator[SampleView]:
    """Each sample's judgments rows as a table; its outcome their status (or "mixed")."""
    judgments = store.get_by_key(suite.stages.judgments, judgments_key).frame()
    key = [column for column in suite.sample_key if column != "sample_index"]
    columns = [c for c in judgments.columns if c not in key and c not in (
        "model", "judge", "prompt_tokens", "completion_tokens", "request_key")]
    by = [*key, "sample_index"] if "sample_index" in judgments.columns else key
    for _, rows in judgments.group_by(by, maintain_order=True):
        first = rows.row(0, named=True)
        statuses = set(rows["status"].to_list()) if "status" in rows.columns else {"?"}
        group = first.get(suite.group_column)
        cells = (str(first[key[0]]),
                 str(first.get(key[1]) if len(key) > 1 else first.get("sample_index", 0)),
                 ", ".join(map(str, group)) if isinstance(group, list) else str(group))
        yield SampleView(
            sample=":".join(str(first[c]) for c in key), cells=cells,
            outcome=statuses.pop() if len(statuses) == 1 else "mixed", shared=[],
            result=[table(columns, [[shown(row[c]) for c in columns]
                                    for row in rows.iter_rows(named=True)])],
            sample_index=int(first.get("sample_index") or 0))


def evaluation_tables(suite: Viewed, store: ArtifactStore, judgments_key: str
                      ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """An evaluation's samples, responses and judgments tables (its inputs, by the keys its
    judgments artifact recorded); an empty frame for an input no longer stored."""
    judgments = store.get_by_key(suite.stages.judgments, judgments_key)
    found = []
    material = judgments.material()
    for stage in (suite.stages.responses, suite.stages.samples):
        key = (material.get("inputs") or {}).get(stage)
        try:
            artifact = store.get_by_key(stage, key) if key else None
        except FileNotFoundError:
            artifact = None
        found.append(artifact.frame() if artifact is not None else pl.DataFrame())
        material = artifact.material() if artifact is not None else {}
    responses, samples = found
    return samples, responses, judgments.frame()
