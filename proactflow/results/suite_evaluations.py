"""The evaluations of the suites whose evaluations are read through the suite (all but the one
evaluations.py reads with its triggers) in a store: one per judgments artifact of each suite,
with its model, judge and variant, labelled like evaluations.py's, and selected by the same
options; of the one type of evaluation.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..cache.artifacts import ArtifactStore
from .evaluation import Evaluation
from .evaluations import judgments_keys_of_runs

if TYPE_CHECKING:
    from ..suites.base import Suite


def suite_evaluation(suite: "Suite", store: ArtifactStore, key: str) -> Evaluation | None:
    """The evaluation of one judgments artifact of `suite`; None when it holds no row."""
    artifact = store.get_by_key(suite.stages.judgments, key)
    frame = artifact.frame()
    if frame.is_empty():
        return None
    first = frame.row(0, named=True)
    return Evaluation(suite, key, str(first.get("model") or "?"), str(first.get("judge") or "-"),
                      suite.variant_name(frame), artifact.complete)


def suite_evaluations(store: ArtifactStore, *, runs: list[str] | None = None,
                      models: list[str] | None = None, include_incomplete: bool = False
                      ) -> list[Evaluation]:
    """Every (complete, by default) evaluation of each suite but ProactBench in the store,
    labelled: a short key is added where two would read the same."""
    from ..suites import get_suite, suite_names

    wanted = judgments_keys_of_runs(store, runs) if runs else None
    found: list[Evaluation] = []
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
