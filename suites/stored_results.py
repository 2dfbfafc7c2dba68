"""What a suite does with results already in a store, beside running: storing a benchmark's
published results (`proactflow import --suite NAME`) and narrowing stored responses for
`rejudge --all-models`.

Suite (base.py) inherits these defaults; a benchmark overrides what it has. An importer stores
the stages a run would, so it needs what the run layer computes (samples materialised, scores,
a stage's key, the run record an import leaves): the core lends those as ImportTools
(results/upkeep/imports.py), and the suite's folder never imports the layers above it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..cache.artifacts import Artifact, ArtifactSpec, ArtifactStore
from ..common.errors import UserError
from ..config.settings import RunSettings
from .declarations import Prompts, SuiteModules

Suite = Any
"""A suite (base.py's Suite, which inherits SuiteStoredResults: not imported here, or the two
modules would need each other)."""


class ImportTools(ABC):
    """What the core lends a suite's importer: the stages it stores as a run of the same
    settings would, and the run record that lets `runs ls` list an import and `gc` keep it."""

    @abstractmethod
    def samples(self, suite: Suite, settings: RunSettings) -> Artifact:
        """The samples artifact of these settings, materialised as a run does."""

    @abstractmethod
    def scores(self, suite: Suite, judgments: Artifact) -> Artifact:
        """The scores artifact of stored judgments, materialised as a run does."""

    @abstractmethod
    def responses_spec(self, suite: Suite, settings: RunSettings, samples_key: str,
                       prompts: Prompts) -> ArtifactSpec:
        """The key a run of these settings gives its responses."""

    @abstractmethod
    def record(self, path: Path, digest: str, model: str, judge: str,
               artifacts: dict[str, str], corpus_revision: str | None) -> None:
        """The run record of one import (`flow: import`) naming what it stored."""


@dataclass(frozen=True)
class NarrowedResponses:
    """Stored responses restricted to a narrower selection (`rejudge --all-models --limit`),
    stored as the samples and responses artifacts a run with that selection would have."""

    samples_key: str
    responses_key: str
    limit: int | None
    groups: tuple[str, ...]
    samples: int
    """Rows of the narrowed samples."""
    responses: int
    """Rows of the narrowed responses."""


class SuiteStoredResults:
    """The defaults of Suite for results already stored: nothing to import, nothing to
    narrow."""

    name: ClassVar[str]
    modules: ClassVar[SuiteModules]

    def import_published(self, source: str, store: ArtifactStore, tools: ImportTools, *,
                         corpus: str | None, judge: str, model: str | None) -> list[str]:
        """Store one source of the benchmark's published results (a file or a folder, as
        given on the command line); returns the lines the command prints about it. By
        default the declared `imports` module's (SuiteModules)."""
        importer = self.modules.module("imports")
        if importer is None:
            raise UserError(f"the {self.name} suite has no published results to import")
        return importer.import_published(self, source, store, tools, corpus=corpus,
                                         judge=judge, model=model)

    def narrow_stored_responses(self, store: ArtifactStore, evaluation: Any, limit: int | None,
                                groups: tuple[str, ...]) -> NarrowedResponses | None:
        """An evaluation's responses (results/evaluations.py's, for the suite whose
        evaluations are read with their samples) restricted to the first `limit` episodes and
        `groups`; None when that selects what they already are."""
        raise UserError(f"the {self.name} suite cannot narrow its stored responses")
