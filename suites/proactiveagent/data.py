"""ProactiveBench's data as rows: the test traces with their splits, and the reward test set.

Parsing works on bytes, so the same checks apply to a local folder and to files downloaded at
the pinned commit (`upstream.py`); the two `read_*` functions are the only local file reads.
Every problem is one line naming the file and what is wrong in it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...common.errors import CorpusError, UserError
from .metrics import CATEGORIES

SPLITS_FILE = "splits.json"


class TraceEvent(BaseModel):
    """One event of a test trace: what the model under test sees, and what the judge sees."""

    model_config = ConfigDict(frozen=True)

    trace: str = Field(description="The trace's file name without .json, e.g. code_11.")
    index: int = Field(ge=0, description="0-based position of the event in its trace.")
    time: str = Field(description="observation.time: a Unix timestamp in seconds, as text.")
    event: str = Field(description="observation.event: what the user did, in one sentence.")
    observation_json: str = Field(description=(
        "The observation object exactly as the trace holds it (key order and any extra keys), "
        "as JSON text, for the judge's message to be rebuilt byte for byte."))
    task_status: bool = Field(description=(
        "The trace's task_status; no upstream script reads it (probably: help was warranted)."))
    splits: tuple[str, ...] = Field(description="The splits of splits.json naming this trace.")

    def observation(self) -> dict[str, Any]:
        return json.loads(self.observation_json)


class RewardTestRow(BaseModel):
    """One human-labelled example of the reward test set, for judge calibration."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0, description="0-based position of the row in the file.")
    observations_json: str = Field(description=(
        "`obs`, the observations so far, exactly as the file holds them, as JSON text."))
    pred_task: str | None = Field(description="The proposed task; None when none was proposed.")
    valid: bool = Field(description="The human label: the proposal (or its absence) is right.")
    annotation: tuple[bool, ...] = Field(description="Each annotator's verdict.")
    help_needed: bool = Field(description="Whether the user needed help at that point.")
    category: str = Field(description="One of Missed-Need, Correct-Rejection, Correct-Detection, "
                                      "False-Alarm, spelt as the file does (metrics.CATEGORIES).")

    def observations(self) -> list[dict[str, Any]]:
        return json.loads(self.observations_json)


class _RawRewardRow(BaseModel):
    """A line of the reward test set as upstream writes it; strict, so "true" is no boolean."""

    model_config = ConfigDict(extra="ignore", strict=True)

    obs: list[dict[str, Any]]
    pred_task: str | None
    valid: bool
    annotation: list[bool]
    help_needed: bool
    category: str


def _decode_json(data: bytes, source: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: invalid JSON ({exc.msg} at line {exc.lineno} column "
                        f"{exc.colno})") from None


def parse_splits(data: bytes, source: str) -> dict[str, list[str]]:
    """Split name -> its trace file names, in the file's order."""
    raw = _decode_json(data, source)
    if not isinstance(raw, dict) or not raw:
        raise UserError(f"{source}: expected an object of splits, each with a list \"files\"")
    splits: dict[str, list[str]] = {}
    for name, split in raw.items():
        files = split.get("files") if isinstance(split, dict) else None
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise UserError(f"{source}: split {name!r} has no list of file names \"files\"")
        if len(set(files)) != len(files):
            # Upstream would pool such a file's events twice; say so rather than guess.
            raise UserError(f"{source}: split {name!r} names a file twice")
        splits[name] = files
    return splits


def parse_trace(data: bytes, source: str, trace: str,
                splits: tuple[str, ...] = ()) -> list[TraceEvent]:
    """The events of one trace file (a JSON list of events in time order)."""
    raw = _decode_json(data, source)
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{source}: expected a non-empty JSON list of events")
    events = []
    for index, item in enumerate(raw):
        where = f"{source}: event {index}"
        observation = item.get("observation") if isinstance(item, dict) else None
        if not isinstance(observation, dict):
            raise UserError(f"{where} has no object \"observation\"")
        for field in ("time", "event"):
            if not isinstance(observation.get(field), str):
                problem = "has no" if field not in observation else "has a non-string"
                raise UserError(f"{where} {problem} observation.{field}")
        if not isinstance(item.get("task_status"), bool):
            problem = "has no" if "task_status" not in item else "has a non-boolean"
            raise UserError(f"{where} {problem} task_status")
        events.append(TraceEvent(
            trace=trace, index=index, time=observation["time"], event=observation["event"],
            observation_json=json.dumps(observation, ensure_ascii=False),
            task_status=item["task_status"], splits=splits))
    return events


def trace_name(file_name: str) -> str:
    return file_name[:-len(".json")] if file_name.endswith(".json") else file_name


def split_membership(splits: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    """Trace file name -> the splits naming it, every named file once, in first-seen order."""
    member: dict[str, list[str]] = {}
    for name, files in splits.items():
        for file_name in files:
            member.setdefault(file_name, []).append(name)
    return {file_name: tuple(names) for file_name, names in member.items()}


def read_local_corpus(folder: str | Path) -> tuple[list[TraceEvent], dict[str, list[str]]]:
    """Every event of the traces that splits.json names (a file in the folder that no split
    names is not measured upstream, so it is not read) and split name -> trace names."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise UserError(f"ProactiveBench folder not found: {folder}" if not folder.exists()
                        else f"not a folder: {folder} (expected a folder holding splits.json "
                             "and the trace files)")
    splits_path = folder / SPLITS_FILE
    if not splits_path.is_file():
        raise UserError(f"{folder} has no {SPLITS_FILE} (it lists the trace files of each split)")
    splits = parse_splits(_read(splits_path), str(splits_path))
    events: list[TraceEvent] = []
    for file_name, names in split_membership(splits).items():
        path = folder / file_name
        if not path.is_file():
            raise UserError(f"{splits_path}: split {names[0]!r} names {file_name}, which is not "
                            f"in {folder}")
        events += parse_trace(_read(path), str(path), trace_name(file_name), names)
    return events, {name: [trace_name(f) for f in files] for name, files in splits.items()}


def parse_reward_test_set(data: bytes, source: str) -> list[RewardTestRow]:
    """The rows of a reward test file (JSON lines; blank lines skipped)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise CorpusError(source, line, f"not valid UTF-8 (byte {exc.start})") from None
    rows: list[RewardTestRow] = []
    for number, line_text in enumerate(text.splitlines(), start=1):
        if not line_text.strip():
            continue
        try:
            raw = _RawRewardRow.model_validate_json(line_text)
        except ValidationError as exc:
            error = exc.errors()[0]
            if error["type"] == "json_invalid":
                raise CorpusError(source, number, "invalid JSON") from None
            field = ".".join(str(part) for part in error["loc"]) or "(row)"
            raise CorpusError(source, number, f"field {field}: {error['msg']}") from None
        if raw.category not in CATEGORIES:
            raise CorpusError(source, number, f"unknown category {raw.category!r}")
        # The row's own JSON text, re-read for `obs` alone, keeps the file's key order.
        obs = json.loads(line_text)["obs"]
        rows.append(RewardTestRow(
            index=len(rows), observations_json=json.dumps(obs, ensure_ascii=False),
            pred_task=raw.pred_task, valid=raw.valid, annotation=tuple(raw.annotation),
            help_needed=raw.help_needed, category=raw.category))
    if not rows:
        raise CorpusError(source, None, "no rows (the file is empty)")
    return rows


def read_reward_test_set(path: str | Path) -> list[RewardTestRow]:
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"reward test file not found: {path}")
    return parse_reward_test_set(_read(path), str(path))


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
