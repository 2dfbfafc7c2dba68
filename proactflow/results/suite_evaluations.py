"""The evaluations of the suites other than ProactBench in a store, for the viewer: one per
judgments artifact of each suite, with its model, judge and variant, labelled like
ProactBench's (evaluations.py), and selected by the same options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..cache.artifacts import ArtifactStore
from .evaluations import judgments_keys_of_runs

if TYPE_CHECKING:
    from ..suites.base import Suite

@dataclass(frozen=True)
class SuiteEvaluation:
    """One judgments artifact of a suite: what the viewer lists and opens."""

    suite: "Suite"
    key: str
    model: str
    judge: str
    variant: str
    complete: bool
    label: str = ""
    source: str = "run"
    store: ArtifactStore | None = None
    """Where the viewer reads it, when not the store it is given (a night's versions:
    cache/pinned.py)."""

    @property
    def base_label(self) -> str:
        return f"{self.model} judged by {self.judge}" + (f" ({self.variant})"
                                                         if self.variant else "")


def suite_evaluation(suite: "Suite", store: ArtifactStore, key: str) -> SuiteEvaluation | None:
    """The evaluation of one judgments artifact of `suite`; None when it holds no row."""
    artifact = store.get_by_key(suite.stages.judgments, key)
    frame = artifact.frame()
    if frame.is_empty():
        return None
    first = frame.row(0, named=True)
    return SuiteEvaluation(suite, key, str(first.get("model") or "?"),
                           str(first.get("judge") or "-"), suite.variant_name(frame),
                           artifact.complete)


def suite_evaluations(store: ArtifactStore, *, runs: list[str] | None = None,
                      models: list[str] | None = None, include_incomplete: bool = False
                      ) -> list[SuiteEvaluation]:
    """Every (complete, by default) evaluation of each suite but ProactBench in the store,
    labelled: a short key is added where two would read the same."""
    from ..suites import get_suite, suite_names

    wanted = judgments_keys_of_runs(store, runs) if runs else None
    found: list[SuiteEvaluation] = []
    for name in suite_names():
        suite = get_suite(name)
        if suite.evaluations_with_triggers:  # evaluations.py's
            continue
        for key in sorted(store.keys(suite.stages.judgments)):
            if wanted is not None and key not in wanted:
                continue
            try:
                evaluation = suite_evaluation(suite, store, key)
            except FileNotFoundError:  # moved aside as unreadable meanwhile (said in one line)
                continue
            if evaluation is None or (not evaluation.complete and not include_incomplete):
                continue
            if models and evaluation.model not in models:
                continue
            found.append(evaluation)
    found.sort(key=lambda e: (e.suite.name, e.base_label, e.key))
    counts: dict[tuple[str, str], int] = {}
    for evaluation in found:
        counts[(evaluation.suite.name, evaluation.base_label)] = counts.get(
            (evaluation.suite.name, evaluation.base_label), 0) + 1
    from dataclasses import replace

    return [replace(e, label=e.base_label + (f" [{e.key[:8]}]" if counts[(e.suite.name,
                                                                          e.base_label)] > 1
                                             else "")) for e in found]
