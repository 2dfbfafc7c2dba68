"""`proactflow rejudge --all-models`: judge the stored responses of every selected evaluation
again, with one judge or several, after showing what it will do.

The responses to judge are chosen by the report's rules (evaluations.py: every complete
evaluation, or those selected by run, model or corpus revision), one per distinct responses
artifact, so a smoke test and the full run of a model are two entries, never one replacing the
other. `--limit` and `--phases` narrow each to the triggers a run with those options would have
had: the narrowed triggers and responses are stored as the very artifacts such a run produces.
What is recorded about the model under test is what its responses artifact says, nothing made up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...cache.artifacts import ArtifactStore
from ...common.errors import UserError
from ..evaluations import Evaluation, TriggerSet, stored_evaluations, triggers_suite


@dataclass(frozen=True)
class StoredResponses:
    """One responses artifact to judge again, and what is known of it."""

    model: str
    triggers_key: str
    responses_key: str
    trigger_set: TriggerSet
    source: str
    material: dict[str, Any]
    """The responses artifact's own key material: the truth about how they were made."""
    rows: int


def _narrowed(store: ArtifactStore, evaluation: Evaluation, limit: int | None,
              groups: tuple[str, ...]) -> StoredResponses:
    """The evaluation's responses, restricted to the first `limit` episodes and `groups`
    (its suite's `narrow_stored_responses`), as the artifacts a run with those options would
    have stored."""
    suite = triggers_suite()
    trigger_set = evaluation.trigger_set
    assert trigger_set is not None
    responses_material = store.material(suite.stages.responses, evaluation.responses_key)
    narrowed = suite.narrow_stored_responses(store, evaluation, limit, groups)
    if narrowed is None:
        return StoredResponses(evaluation.model,
                               responses_material["inputs"][suite.stages.samples],
                               evaluation.responses_key, trigger_set, evaluation.source,
                               responses_material["settings"], evaluation.responses.height)
    narrowed_set = TriggerSet(trigger_set.corpus_revision, narrowed.limit, narrowed.groups,
                              narrowed.samples)
    return StoredResponses(evaluation.model, narrowed.samples_key, narrowed.responses_key,
                           narrowed_set, evaluation.source, responses_material["settings"],
                           narrowed.responses)


def select_stored_responses(store: ArtifactStore, *, runs: list[str] | None,
                            models: list[str] | None, corpus_revision: str | None,
                            include_incomplete: bool, limit: int | None,
                            phases: tuple[str, ...]) -> list[StoredResponses]:
    """One entry per distinct responses artifact of the selected evaluations."""
    chosen: dict[str, StoredResponses] = {}
    for evaluation in stored_evaluations(store, runs=runs, models=models,
                                         corpus_revision=corpus_revision,
                                         include_incomplete=include_incomplete):
        if evaluation.responses_key in chosen:
            continue
        chosen[evaluation.responses_key] = _narrowed(store, evaluation, limit, phases)
    if not chosen:
        raise UserError(f"no stored responses in {store.url} for this selection: run "
                        "'proactflow run' or 'proactflow import' first")
    return list(chosen.values())


def model_under_test_facts(entry: StoredResponses) -> dict[str, Any]:
    """What the run record says of the model under test: the responses artifact's own facts
    (its model role, or an import's file), never settings made up for the occasion."""
    facts: dict[str, Any] = {"model": entry.model, "source": entry.source,
                             "responses": entry.responses_key}
    role = entry.material.get("model_under_test")
    if isinstance(role, dict):
        facts.update(role)
    else:
        facts.update({k: v for k, v in entry.material.items() if k != "model"})
        facts["generation"] = "unknown (published results)"
    return facts


def plan_lines(entries: list[StoredResponses], judges: list[str],
               judge_calls: dict[tuple[str, str], tuple[int, int]]) -> list[str]:
    lines = [f"rejudge     {len(entries)} stored responses x {len(judges)} judge(s)"]
    for entry in entries:
        lines.append(f"  {entry.model} ({entry.source}, responses {entry.responses_key[:10]}): "
                     f"{entry.rows} responses on {entry.trigger_set.describe()}")
        for judge in judges:
            total, cached = judge_calls[(entry.responses_key, judge)]
            lines.append(f"    judged by {judge}: {total} calls, {cached} cached, "
                         f"{total - cached} to make")
    return lines


def rejudge_arguments(entry: StoredResponses) -> dict[str, Any]:
    """What the `rejudge` flow is given, beside the settings, to judge `entry` again."""
    return {"triggers_key": entry.triggers_key, "responses_key": entry.responses_key,
            "model_under_test_facts": model_under_test_facts(entry)}
