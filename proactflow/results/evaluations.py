"""Evaluations in a store, each with one identity: its judgments artifact key.

Two judge prompts, two generation settings, a `--limit 5` smoke test and the full run, a fresh
run and the imported published results of one model: each is its own evaluation, never pooled
with another or replaced by the newer file. A readable label names the model and judge and, only
where two evaluations would otherwise read the same, what differs between them. Every evaluation
also carries its trigger set (corpus revision, limit, phases), so that nothing scored on
different triggers is ranked together unannounced.
"""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING, Any

from ..cache.artifacts import ArtifactStore
from ..run.run_records import find_record, read_records
from .evaluation import Evaluation, EvaluationTables, TriggerSet

if TYPE_CHECKING:
    from ..suites.base import Suite


@functools.cache
def triggers_suite() -> "Suite":
    """The suite whose evaluations this module reads, with their samples (triggers) and
    responses (`Suite.evaluations_with_triggers`): the report, the viewer and `rejudge
    --all-models` hand them to it."""
    from ..suites import get_suite, suite_names

    return next(found for found in map(get_suite, suite_names())
                if found.evaluations_with_triggers)


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "model"


def _facts(judgments_material: dict[str, Any], responses_material: dict[str, Any],
           trigger_set: TriggerSet, source: str) -> dict[str, Any]:
    judging = judgments_material.get("settings", {})
    generating = responses_material.get("settings", {})
    role = generating.get("model_under_test") or {}
    judge = judging.get("judge") if isinstance(judging.get("judge"), dict) else {}
    facts: dict[str, Any] = {
        "source": source,
        "prompt": str(judging.get("judge_prompt_sha256", "unknown"))[:10],
        "corpus": trigger_set.corpus_revision.removeprefix("sha256:")[:10],
        "limit": trigger_set.limit or "all",
        "phases": ",".join(trigger_set.phases),
        "samples": generating.get("samples", 1),
        "endpoint": role.get("api_base"),
        "revision": role.get("revision"),
        "fingerprint": (role.get("endpoint_fingerprint") or "")[:10] or None,
        "judge endpoint": judge.get("api_base"),
        "format": judging.get("response_format"),
        "import": generating.get("imported_file_sha256", "")[:10] or None,
    }
    for name, value in sorted((role.get("generation") or {}).items()):
        facts[name] = value
    for name, value in sorted((judge.get("generation") or {}).items()):
        facts[f"judge {name}"] = value
    return facts


def distinguish(evaluations: list[Evaluation]) -> list[Evaluation]:
    """Each evaluation with a label: model and judge, plus whatever tells it apart from the
    others of the same model and judge; a short key where nothing recorded does."""
    by_base: dict[str, list[Evaluation]] = {}
    for evaluation in evaluations:
        by_base.setdefault(evaluation.base_label, []).append(evaluation)
    labelled = []
    for evaluation in evaluations:
        peers = by_base[evaluation.base_label]
        label = evaluation.base_label
        if len(peers) > 1:
            differing = [name for name in evaluation.facts
                         if len({json.dumps(p.facts.get(name), default=str) for p in peers}) > 1]
            shown = ", ".join(f"{name} {evaluation.facts.get(name)}" for name in differing)
            label += f" [{shown or 'key ' + evaluation.key[:10]}]"
        labelled.append(_replace(evaluation, label=label))
    return labelled


def _replace(evaluation: Evaluation, **changes: Any) -> Evaluation:
    from dataclasses import replace

    return replace(evaluation, **changes)


def evaluation_of(store: ArtifactStore, judgments_key: str) -> Evaluation | None:
    """The evaluation a judgments artifact belongs to, with its inputs; None when it or an input
    is missing, or it holds no row."""
    try:
        judgments_artifact = store.get_by_key("judgments", judgments_key)
        judgments_material = judgments_artifact.material()
        responses_key = judgments_material.get("inputs", {}).get("responses", "")
        responses_artifact = store.get_by_key("responses", responses_key)
        responses_material = responses_artifact.material()
        triggers_key = responses_material.get("inputs", {}).get("triggers", "")
        triggers_artifact = store.get_by_key("triggers", triggers_key)
    except FileNotFoundError:
        return None
    judgments = judgments_artifact.frame()
    if judgments.is_empty():
        return None
    triggers = triggers_artifact.frame()
    selection = triggers_artifact.material().get("settings", {})
    trigger_set = TriggerSet(
        corpus_revision=str(selection.get("corpus_revision", "")),
        limit=selection.get("limit"),
        phases=tuple(sorted(selection.get("phases") or ("CRITICAL", "EMERGENT", "RECOVERY"))),
        triggers=triggers.height)
    source = "import" if "imported_file_sha256" in responses_material.get("settings", {}) \
        else "run"
    model, judge, sha = judgments.select("model", "judge", "judge_prompt_sha256").row(0)
    return Evaluation(triggers_suite(), judgments_key, model, judge,
                      complete=judgments_artifact.complete, source=source,
                      tables=EvaluationTables(
                          sha, triggers, responses_artifact.frame(), judgments,
                          responses_key=responses_key, trigger_set=trigger_set,
                          facts=_facts(judgments_material, responses_material, trigger_set,
                                       source)))


def judgments_keys_of_runs(store: ArtifactStore, runs: list[str]) -> set[str]:
    """The judgments keys of the run records whose id (or file name) starts with each of
    `runs`; a one-line error for an id that matches no record or several."""
    records = read_records(store)
    keys = set()
    for wanted in runs:
        key = find_record(records, wanted, store).artifacts.get("judgments")
        if key:
            keys.add(key)
    return keys


def stored_evaluations(store: ArtifactStore, *, runs: list[str] | None = None,
                       models: list[str] | None = None, corpus_revision: str | None = None,
                       include_incomplete: bool = False) -> list[Evaluation]:
    """The evaluations in the store, each judgments artifact its own (all complete ones by
    default), selected by run, model or corpus revision (a prefix), with labels."""
    wanted_keys = judgments_keys_of_runs(store, runs) if runs else None
    found = []
    for key in sorted(store.keys("judgments")):
        if wanted_keys is not None and key not in wanted_keys:
            continue
        evaluation = evaluation_of(store, key)
        if evaluation is None or (not evaluation.complete and not include_incomplete):
            continue
        if models and evaluation.model not in models:
            continue
        if corpus_revision and not (evaluation.trigger_set and evaluation.trigger_set
                                    .corpus_revision.removeprefix("sha256:")
                                    .startswith(corpus_revision.removeprefix("sha256:"))):
            continue
        found.append(evaluation)
    found.sort(key=lambda e: (e.base_label, e.source, e.key))
    return distinguish(found)


def file_names(evaluations: list[Evaluation]) -> dict[str, str]:
    """Evaluation key -> a file-system-safe name: `<model>__<judge>` where that is unique, with
    a short key added where two evaluations would share it."""
    names = {e.key: f"{safe_name(e.model)}__{safe_name(e.judge)}" for e in evaluations}
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    return {key: name if counts[name] == 1 else f"{name}__{key[:10]}"
            for key, name in names.items()}
