"""Run records: the JSON file each run (and each import) leaves in `<store>/runs/`.

A record names the artifacts its run produced or reused; `proactflow runs` lists, shows and
removes records, and `proactflow gc` keeps every artifact a kept record needs. The store reads
and writes them (cache/artifacts.py), wherever it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..cache.artifacts import ArtifactStore
from ..config.generation import DEFAULT_SUITE
from ..config.settings import RULES
from ..common.errors import UserError


@dataclass(frozen=True)
class RunRecord:
    """One run record as read from the store."""

    name: str
    """The record's file name without `.json`: `<started>-<run id prefix>`."""
    content: dict[str, Any]
    modified: float
    """When its file was written (epoch seconds)."""
    location: str
    """Where it is: a path or a URL."""

    @property
    def run_id(self) -> str:
        return str(self.content.get("run_id", ""))

    @property
    def flow(self) -> str:
        return str(self.content.get("flow", "?"))

    @property
    def started(self) -> datetime:
        text = self.content.get("started")
        try:
            moment = datetime.fromisoformat(str(text))
        except ValueError:  # a record without a readable time: its file's time
            moment = datetime.fromtimestamp(self.modified, timezone.utc)
        return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)

    @property
    def model(self) -> str:
        return str((self.content.get("model_under_test") or {}).get("model", "?"))

    @property
    def judge(self) -> str:
        """The judge's model; a run scored without one (the multimodal MCQA) says "rules", as
        its judgments and the console do."""
        judge = self.content.get("judge")
        return str(judge.get("model", "?")) if isinstance(judge, dict) else RULES

    @property
    def suite(self) -> str:
        """The suite it ran (a record of the default suite names none)."""
        return str(self.content.get("suite") or DEFAULT_SUITE)

    @property
    def series(self) -> tuple[str, str, str]:
        """What `gc --keep-latest` counts runs within: one model judged by one judge on one
        suite (the same model and judge on two suites are two series, each keeping its own)."""
        return self.suite, self.model, self.judge

    @property
    def artifacts(self) -> dict[str, str]:
        """Stage name -> key of every artifact the run produced or reused."""
        return {stage: key for stage, key in (self.content.get("artifacts") or {}).items()
                if isinstance(key, str)}

    @property
    def complete(self) -> bool:
        return bool(self.content.get("complete"))


def runs_folder(store: ArtifactStore) -> str:
    return store.location("runs")


def read_records(store: ArtifactStore, *, run_id: str = "") -> list[RunRecord]:
    """Every run record of the store (or those whose name says they may be of `run_id`), oldest
    first; an unreadable file is a one-line error."""
    records = []
    for entry, data in store.records(run_id):
        location = store.location(entry.name)
        try:
            content = json.loads(data.decode("utf-8"))
        except ValueError as exc:
            raise UserError(f"{location}: not a readable run record ({exc}); move it away") \
                from None
        if isinstance(content, dict):
            name = entry.name.rsplit("/", 1)[-1].removesuffix(".json")
            records.append(RunRecord(name, content, entry.modified, location))
    records.sort(key=lambda r: (r.started, r.name))
    return records


def find_record(records: list[RunRecord], wanted: str, store: ArtifactStore) -> RunRecord:
    """The one record whose run id or file name starts with `wanted`."""
    matches = [r for r in records if r.run_id.startswith(wanted) or r.name.startswith(wanted)]
    if len(matches) != 1:
        raise UserError(f"run {wanted!r} matches {len(matches)} run records in "
                        f"{runs_folder(store)}"
                        + (": give a longer prefix of its id" if matches else
                           ": see 'proactflow runs ls'"))
    return matches[0]


def record_name(started: datetime, run_id: str) -> str:
    """The file a run record is written to, relative to the store root."""
    return f"runs/{started.strftime('%Y%m%dT%H%M%SZ')}-{run_id[:8]}.json"


def listing_lines(records: list[RunRecord], store: ArtifactStore) -> list[str]:
    """`runs ls`: one line per record, newest first, with artifacts that are gone marked."""
    if not records:
        return [f"no run records in {runs_folder(store)}"]
    stored = {(k.stage, k.key) for k in store.inventory()[0] if k.versions or k.incomplete}
    width = max(len("suite"), *(len(record.suite) for record in records))
    lines = [f"{'run':<26} {'flow':<8} {'complete':<8} {'suite':<{width}} model judged by judge"]
    for record in reversed(records):
        missing = [stage for stage, key in record.artifacts.items() if (stage, key) not in stored]
        lines.append(f"{record.name:<26} {record.flow:<8} {'yes' if record.complete else 'no':<8} "
                     f"{record.suite:<{width}} {record.model} judged by {record.judge}"
                     + (f"  (artifacts gone: {', '.join(missing)})" if missing else ""))
    return lines
