"""Prefect flows: `evaluate` (triggers → responses → judgments → phase_scores) and `rejudge`
(judgments → phase_scores over cached responses).

One task per stage: a tracked task run costs milliseconds and a row in the UI, so the hundreds of
LLM calls of a stage run inside its task under an asyncio pool rather than as tasks of their own.
Prefect's result cache is off (its default policy keys on the run id, so it never reuses work
across runs); the stages own their content-addressed Parquet artifacts instead.
"""

from __future__ import annotations

import re
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import acreate_link_artifact, acreate_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from proactflow.cache.artifacts import Artifact, ArtifactStore
from proactflow.exports import write_outputs
from proactflow.pipeline import (StageReport, load_judge_prompt, materialize_judgments,
                                 materialize_phase_scores, materialize_responses,
                                 materialize_triggers, open_call_cache, responses_ready,
                                 stored_responses, with_endpoint_fingerprints)
from proactflow.pools import run_together
from proactflow.records import run_provenance, usage_and_cost, write_run_record
from proactflow.settings import RunSettings
from proactflow.sources import locate_corpus
from proactflow.streaming import RowStream


def run_store(settings: RunSettings) -> ArtifactStore:
    """The store as this run writes it: a --refresh writes new versions of the stages it asks
    again, where any other writer keeps a complete output already stored."""
    return ArtifactStore(settings.store, refreshing=settings.refreshed_stages())


@task(name="triggers", cache_policy=NO_CACHE, persist_result=False)
def triggers_task(settings: RunSettings) -> tuple[Artifact, StageReport, str]:
    corpus = locate_corpus(settings.corpus)
    artifact, report = materialize_triggers(settings, run_store(settings), corpus)
    return artifact, report, corpus.revision


@task(name="responses", cache_policy=NO_CACHE, persist_result=False)
async def responses_task(settings: RunSettings, triggers: Artifact,
                         stream: RowStream | None = None) -> tuple[Artifact, StageReport]:
    store = run_store(settings)
    calls = open_call_cache(store)
    try:
        return await materialize_responses(settings, store, calls, triggers, get_run_logger(),
                                           stream)
    finally:
        calls.close()


@task(name="judgments", cache_policy=NO_CACHE, persist_result=False)
async def judgments_task(settings: RunSettings, triggers: Artifact,
                         responses: Artifact | RowStream) -> tuple[Artifact, StageReport, str]:
    store = run_store(settings)
    prompt = load_judge_prompt(settings, store)
    calls = open_call_cache(store)
    try:
        artifact, report = await materialize_judgments(settings, store, calls, triggers,
                                                       responses, prompt, get_run_logger())
    finally:
        calls.close()
    return artifact, report, prompt.sha256


@task(name="phase_scores", cache_policy=NO_CACHE, persist_result=False)
def phase_scores_task(settings: RunSettings, judgments: Artifact, recompute: bool = False
                      ) -> tuple[Artifact, StageReport]:
    return materialize_phase_scores(run_store(settings), judgments, recompute=recompute)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "model"


def run_name() -> str:
    settings = flow_run.parameters.get("settings")
    if isinstance(settings, dict):
        settings = RunSettings.model_validate(settings)
    return f"{settings.model_under_test.model} judged by {settings.judge.model}"


async def _run(settings: RunSettings, *, regenerate: bool,
               stored: tuple[str, str] | None = None,
               model_under_test_facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Wire the stages. `stored` names (triggers key, responses key) already in the store, for
    re-judging responses that no run settings describe (imports)."""
    logger = get_run_logger()
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    settings = with_endpoint_fingerprints(
        settings, ("model_under_test", "judge") if regenerate else ("judge",))
    store = run_store(settings)
    if stored is None:
        triggers, triggers_report, revision = triggers_task(settings)
        reports = [triggers_report]
        ready = responses_ready(settings, store, triggers) if regenerate else \
            stored_responses(settings, store, triggers)
    else:
        triggers, ready = (store.get_by_key("triggers", stored[0]),
                           store.get_by_key("responses", stored[1]))
        revision = triggers.material()["settings"].get("corpus_revision", "")
        reports = [StageReport(a.stage, a.key, True, a.complete, 0.0, a.frame().height)
                   for a in (triggers, ready)]
    if ready is None:
        # Judging starts with the first response: both stages run at once, joined by a stream.
        stream = RowStream()
        (responses, responses_report), (judgments, judgments_report, prompt_sha) = \
            await run_together(responses_task(settings, triggers, stream),
                               judgments_task(settings, triggers, stream))
        reports.append(responses_report)
    else:
        responses = ready
        if regenerate:
            _, responses_report = await responses_task(settings, triggers)  # reuses the artifact
            reports.append(responses_report)
        judgments, judgments_report, prompt_sha = await judgments_task(settings, triggers,
                                                                       responses)
    scores, scores_report = phase_scores_task(settings, judgments,
                                              recompute=not judgments_report.reused)
    reports += [judgments_report, scores_report]

    score_frame = scores.frame()
    response_frame, judgment_frame = responses.frame(), judgments.frame()
    complete = scores.complete
    model, judge = settings.model_under_test.model, settings.judge.model
    await acreate_table_artifact(
        key=f"phase-scores-{_slug(model)}-by-{_slug(judge)}",
        table=score_frame.to_dicts(),
        description=f"ProactBench phase scores of **{model}** judged by **{judge}**"
                    + ("" if complete else " (incomplete: some calls failed; re-run to retry)"))
    usage = usage_and_cost(settings, response_frame, judgment_frame, reports)
    provenance = run_provenance(settings, prompt_sha, revision, reports,
                                model_under_test=model_under_test_facts)
    outputs: dict[str, str] = {}
    if settings.out:
        outputs = write_outputs(Path(settings.out), triggers.frame(), response_frame,
                                judgment_frame, score_frame, provenance)
        await acreate_link_artifact(
            key=f"outputs-{_slug(model)}-by-{_slug(judge)}",
            link=Path(outputs["metrics.json"]).resolve().as_uri(), link_text="metrics.json",
            description=f"Exports of {model} judged by {judge}")
    record_path = write_run_record(
        settings, run_id=str(flow_run.id or uuid.uuid4()),
        flow="evaluate" if regenerate else "rejudge", started=started,
        seconds=time.monotonic() - clock, complete=complete, provenance=provenance,
        reports=reports, outputs=outputs, usage=usage,
        model_under_test=model_under_test_facts)
    logger.info("run record: %s", record_path)
    return {"scores": score_frame.to_dicts(), "complete": complete, "record": str(record_path),
            "outputs": outputs, "stages": [r.as_dict() for r in reports], "usage": usage}


@flow(name="evaluate", flow_run_name=run_name, persist_result=False, validate_parameters=True)
async def evaluate(settings: RunSettings) -> dict[str, Any]:
    """Regenerate and judge every trigger of the corpus, then score each phase."""
    return await _run(settings, regenerate=True)


@flow(name="rejudge", flow_run_name=run_name, persist_result=False, validate_parameters=True)
async def rejudge(settings: RunSettings, triggers_key: str | None = None,
                  responses_key: str | None = None,
                  model_under_test_facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Judge the cached responses of a model again (new judge or prompt), then score them.
    With `triggers_key` and `responses_key`, judge those stored artifacts (e.g. an import),
    recording `model_under_test_facts` (what the responses artifact says) about their model."""
    stored = (triggers_key, responses_key) if triggers_key and responses_key else None
    return await _run(settings, regenerate=False, stored=stored,
                      model_under_test_facts=model_under_test_facts)
