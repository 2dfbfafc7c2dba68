"""What a suite declares besides its methods (suites/base.py): where its data is, its
episodes' steps, its stages' names and versions, its tables' row models and its prompts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl
from pydantic import BaseModel

from .sources import Prompt


@dataclass(frozen=True)
class DataSource:
    """Where a suite's samples come from, located but not yet parsed: `revision` (a hub commit,
    a pinned repository commit, or a local file's sha256) enters the samples' key."""

    revision: str
    description: str
    location: Any = None
    """What the suite needs to read the data (a path, a folder, a hub snapshot)."""


Step = tuple[dict[str, Any], dict[str, Any]]
"""One answered step of an episode: (its sample row, its response row)."""


@dataclass(frozen=True)
class StageNames:
    """The artifact folder of each of the suite's four tables, and the version of what fills
    it (bumped when the suite changes what a table holds)."""

    samples: str
    responses: str
    judgments: str
    scores: str
    versions: dict[str, int] = field(default_factory=dict)

    def version(self, stage: str) -> int:
        return self.versions.get(stage, 1)


@dataclass(frozen=True)
class Tables:
    """The row model (pydantic, a description per field) of each table. Responses and
    judgments rows carry `status`, `sample_index`, `prompt_tokens` and `completion_tokens`
    (the run's record sums them)."""

    samples: type[BaseModel]
    responses: type[BaseModel]
    judgments: type[BaseModel]
    scores: type[BaseModel]


@dataclass(frozen=True)
class Prompts:
    """The prompts of one role, by name; their hashes enter that role's artifact keys."""

    by_name: dict[str, Prompt] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Prompt:
        return self.by_name[name]

    def hashes(self) -> dict[str, str]:
        return {name: prompt.sha256 for name, prompt in sorted(self.by_name.items())}


@dataclass(frozen=True)
class ViewColumn:
    """A column of the viewer's list for one suite: its header, its width (CSS), and whether
    the page offers it as a filter (`split` for a cell holding several values joined by ", ",
    a sample then matching each of them)."""

    name: str
    width: str = "auto"
    filter: bool = False


@dataclass(frozen=True)
class ViewSpec:
    """How the viewer lists one suite's samples (suites/base.py, `Suite.view_spec`): three
    columns of the list, the word for a row's outcome, and the outcomes, each with its tone
    ("good", "bad", "mid" or "none") for its colour."""

    columns: tuple[ViewColumn, ...]
    outcome_name: str = "outcome"
    outcomes: dict[str, str] = field(default_factory=dict)
    extra_filters: tuple[str, ...] = ()
    """Names of cells beyond the listed columns, offered as filters (ProactBench: category)."""
    title: str = ""
    """The suite's name in the viewer (default: its display name)."""
    outcome_width: str = "130px"


@dataclass
class SampleView:
    """What the viewer shows of one sample in one evaluation (`Suite.sample_views`).

    `cells` fill the list's columns and the extra filters, in the spec's order; `shared` is
    what every evaluation of the sample shows alike (the question, the gold answer) and
    `result` this evaluation's own part (its replies, images, scores), both as blocks the page
    draws (results/viewer/script.py: text, facts, table, image). `files` are the images the
    blocks name (`media/<name>`): bytes, or a path to copy; written once per name."""

    sample: str
    cells: tuple[str, ...]
    outcome: str
    shared: list[dict[str, Any]]
    result: list[dict[str, Any]]
    sample_index: int = 0
    files: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SuiteModules:
    """Where a suite keeps what it shows, declared once (the suite's package and the names of
    its modules there); suites/presentation.py hands each question to them:
    `views`: SPEC (the viewer's list) and `sample_views(suite, store, judgments_key)`;
    `history`: METRIC, `history_samples(judgments)` and `view_sample(sample)`;
    `report`: `section(store, out, *, keys, include_incomplete, published)`, the suite's
    section of the report page and its leaderboard, and `leaderboard(store, keys, *,
    include_incomplete, seed)`, the leaderboard alone (a sweep's without files);
    `imports`: `import_published(suite, source, store, tools, *, corpus, judge, model)`, the
    benchmark's published results stored (suites/stored_results.py).
    A module left None: the defaults of suites/presentation.py and stored_results.py. A name
    is relative to the package (".published_traces": beside it, in its parent package)."""

    package: str = ""
    views: str | None = None
    history: str | None = None
    report: str | None = None
    imports: str | None = None

    def module(self, part: str) -> Any:
        """The declared module of `part` ("views", "history", "report", "imports"), imported;
        None when none is."""
        import importlib

        name = getattr(self, part)
        return importlib.import_module(f".{name}", self.package) if name else None


@dataclass
class ReportPart:
    """What a suite whose evaluations are read with their samples (`evaluations_report`)
    gives the report page: the pieces the page is laid out from, the files it wrote, and the
    console's lines."""

    contents: str
    """Its heading as the page's contents list it."""
    intro: str
    """What is said before the viewer's link: how to read the figures."""
    body: str
    """Its sections."""
    board: pl.DataFrame
    coverage: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)
