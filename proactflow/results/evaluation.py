"""The one evaluation type the viewer, the report and the history read: a judgments artifact of
a suite, with its identity and labels, and what its suite adds.

Every suite's evaluation says which suite, model, judge and variant it is, whether it is
complete and where it came from. The suite whose evaluations are read with their samples
(`Suite.evaluations_with_triggers`: ProactBench's, read by evaluations.py) adds its tables and
their identity (`EvaluationTables`: the triggers, responses and judgments, the trigger set, the
facts its labels are made of); the other suites' (suite_evaluations.py) are read from their
store when shown, through their suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from ..cache.artifacts import ArtifactStore
from ..cache.keys import content_key

if TYPE_CHECKING:
    from ..suites.base import Suite


@dataclass(frozen=True)
class TriggerSet:
    """Which triggers an evaluation scored."""

    corpus_revision: str
    limit: int | None
    phases: tuple[str, ...]
    triggers: int

    @property
    def key(self) -> str:
        """A short identifier: equal for evaluations scored on the same triggers."""
        return content_key([self.corpus_revision, self.limit, sorted(self.phases)])[:10]

    def describe(self) -> str:
        revision = self.corpus_revision.removeprefix("sha256:")[:10]
        parts = [f"corpus {revision}", f"{self.triggers} triggers"]
        if self.limit:
            parts.append(f"first {self.limit} dialogues")
        if len(self.phases) < 3:
            parts.append("phases " + ",".join(self.phases))
        return ", ".join(parts)


@dataclass(frozen=True)
class EvaluationTables:
    """What an evaluation read with its samples holds besides its identity."""

    judge_prompt_sha256: str
    triggers: pl.DataFrame
    responses: pl.DataFrame
    judgments: pl.DataFrame
    responses_key: str = ""
    trigger_set: TriggerSet | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    """What produced it (prompt, settings, endpoint...): the material labels are made of."""


@dataclass(frozen=True)
class Evaluation:
    """One judgments artifact of a suite: the unit the report ranks, the viewer lists and
    the history compares."""

    suite: "Suite"
    key: str
    """The judgments artifact key: the evaluation's identity."""
    model: str
    judge: str
    variant: str = ""
    """What tells its suite's variants apart (Suite.variant_name); empty for one way to run."""
    complete: bool = True
    label: str = ""
    source: str = "run"
    """'run' or 'import' (published results)."""
    store: ArtifactStore | None = None
    """Where the viewer reads it, when not the store it is given (a night's versions:
    cache/pinned.py)."""
    tables: EvaluationTables | None = None
    """Its tables, for the suite whose evaluations are read with their samples."""

    @property
    def base_label(self) -> str:
        return f"{self.model} judged by {self.judge}" + (f" ({self.variant})"
                                                         if self.variant else "")

    def _tables(self) -> EvaluationTables:
        if self.tables is None:
            raise AttributeError(f"the {self.suite.name} evaluation {self.key[:10]} is read "
                                 "through its suite, without tables")
        return self.tables

    @property
    def judge_prompt_sha256(self) -> str:
        return self._tables().judge_prompt_sha256

    @property
    def triggers(self) -> pl.DataFrame:
        return self._tables().triggers

    @property
    def responses(self) -> pl.DataFrame:
        return self._tables().responses

    @property
    def judgments(self) -> pl.DataFrame:
        return self._tables().judgments

    @property
    def responses_key(self) -> str:
        return self._tables().responses_key

    @property
    def trigger_set(self) -> TriggerSet | None:
        return self.tables.trigger_set if self.tables is not None else None

    @property
    def facts(self) -> dict[str, Any]:
        return self.tables.facts if self.tables is not None else {}

    def tagged(self, judgments: pl.DataFrame | None = None) -> pl.DataFrame:
        """The judgments with the identity columns every group and join uses."""
        frame = self.judgments if judgments is None else judgments
        return frame.with_columns(evaluation=pl.lit(self.key), label=pl.lit(self.label),
                                  trigger_set=pl.lit(self.trigger_set.key
                                                     if self.trigger_set else ""),
                                  source=pl.lit(self.source))
