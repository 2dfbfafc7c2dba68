"""Prefect flows: `evaluate` (samples → responses → judgments → scores, for any suite) and
`rejudge` (judgments → scores over cached responses).

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
from prefect.runtime import deployment, flow_run

from proactflow.cache.artifacts import Artifact
from proactflow.common.postgres import check_database_url, default_database
from proactflow.config.settings import RunSettings
from proactflow.run.pipeline import (StageReport, materialize_judgments, materialize_responses,
                                     materialize_samples, materialize_scores, open_call_cache,
                                     open_store, responses_ready, stored_responses, suite_of,
                                     with_endpoint_fingerprints)
from proactflow.run.records import run_provenance, usage_and_cost, write_run_record
from proactflow.stages.pools import run_together
from proactflow.stages.streaming import RowStream
from proactflow.suites.base import Prompts


@task(name="samples", cache_policy=NO_CACHE, persist_result=False)
def samples_task(settings: RunSettings) -> tuple[Artifact, StageReport, str]:
    suite, store = suite_of(settings), open_store(settings)
    source = suite.locate(settings, store)
    artifact, report = materialize_samples(suite, settings, store, source)
    return artifact, report, source.revision


@task(name="responses", cache_policy=NO_CACHE, persist_result=False)
async def responses_task(settings: RunSettings, samples: Artifact, prompts: Prompts,
                         stream: RowStream | None = None) -> tuple[Artifact, StageReport]:
    store = open_store(settings)
    calls = open_call_cache(store, settings.database)
    try:
        return await materialize_responses(suite_of(settings), settings, store, calls, samples,
                                           prompts, get_run_logger(), stream)
    finally:
        await calls.close()


@task(name="judgments", cache_policy=NO_CACHE, persist_result=False)
async def judgments_task(settings: RunSettings, samples: Artifact,
                         responses: Artifact | RowStream, generation_prompts: Prompts
                         ) -> tuple[Artifact, StageReport, Prompts]:
    suite, store = suite_of(settings), open_store(settings)
    prompts = suite.judge_prompts(settings, store)
    calls = open_call_cache(store, settings.database)
    try:
        artifact, report = await materialize_judgments(suite, settings, store, calls, samples,
                                                       responses, generation_prompts, prompts,
                                                       get_run_logger())
    finally:
        await calls.close()
    return artifact, report, prompts


@task(name="scores", cache_policy=NO_CACHE, persist_result=False)
def scores_task(settings: RunSettings, judgments: Artifact, recompute: bool = False
                ) -> tuple[Artifact, StageReport]:
    return materialize_scores(suite_of(settings), open_store(settings), judgments,
                              recompute=recompute)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "model"


def on_this_machine(settings: RunSettings) -> RunSettings:
    """A deployment's run uses the database its parameters name, unless the worker's own
    PROACTFLOW_DATABASE points at another one (a replica near the worker, say)."""
    own = default_database()
    if deployment.id is None or not own or own == settings.database:
        return settings
    return settings.model_copy(update={"database": check_database_url(own)})


def run_name() -> str:
    settings = flow_run.parameters.get("settings")
    if isinstance(settings, dict):
        settings = RunSettings.model_validate(settings)
    return f"{settings.model_under_test.model} judged by {settings.judge_name}"


async def _run(settings: RunSettings, *, regenerate: bool,
               stored: tuple[str, str] | None = None,
               model_under_test_facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Wire the stages. `stored` names (samples key, responses key) already in the store, for
    re-judging responses that no run settings describe (imports)."""
    logger = get_run_logger()
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    settings = with_endpoint_fingerprints(
        on_this_machine(settings), ("model_under_test", "judge") if regenerate else ("judge",))
    suite, store = suite_of(settings), open_store(settings)
    names = suite.stages
    # The UI shows each stage under the name of the table it writes.
    samples_stage = samples_task.with_options(name=names.samples)
    responses_stage = responses_task.with_options(name=names.responses)
    judgments_stage = judgments_task.with_options(name=names.judgments)
    scores_stage = scores_task.with_options(name=names.scores)
    generation_prompts = suite.generation_prompts(settings, store) if stored is None \
        else Prompts()
    if stored is None:
        samples, samples_report, revision = samples_stage(settings)
        reports = [samples_report]
        ready = responses_ready(suite, settings, store, samples, generation_prompts) \
            if regenerate else stored_responses(suite, settings, store, samples,
                                                generation_prompts)
    else:
        samples, ready = (store.get_by_key(names.samples, stored[0]),
                          store.get_by_key(names.responses, stored[1]))
        revision = samples.material()["settings"].get("corpus_revision", "")
        reports = [StageReport(a.stage, a.key, True, a.complete, 0.0, a.frame().height)
                   for a in (samples, ready)]
    if ready is None:
        # Judging starts with the first response: both stages run at once, joined by a stream.
        stream = RowStream()
        (responses, responses_report), (judgments, judgments_report, prompts) = \
            await run_together(
                responses_stage(settings, samples, generation_prompts, stream),
                judgments_stage(settings, samples, stream, generation_prompts))
        reports.append(responses_report)
    else:
        responses = ready
        if regenerate:  # reuses the artifact
            _, responses_report = await responses_stage(settings, samples, generation_prompts)
            reports.append(responses_report)
        judgments, judgments_report, prompts = await judgments_stage(
            settings, samples, responses, generation_prompts)
    scores, scores_report = scores_stage(settings, judgments,
                                         recompute=not judgments_report.reused)
    reports += [judgments_report, scores_report]

    score_frame = scores.frame()
    response_frame, judgment_frame = responses.frame(), judgments.frame()
    complete = scores.complete
    model, judge = settings.model_under_test.model, settings.judge_name
    await acreate_table_artifact(
        key=f"{_slug(names.scores)}-{_slug(model)}-by-{_slug(judge)}",
        table=suite.summary_rows(score_frame),
        description=f"{suite.display_name} {names.scores.replace('_', ' ')} of **{model}** "
                    f"judged by **{judge}**"
                    + ("" if complete else " (incomplete: some calls failed; re-run to retry)"))
    usage = usage_and_cost(settings, response_frame, judgment_frame, reports)
    provenance = run_provenance(settings, {**generation_prompts.hashes(), **prompts.hashes()},
                                revision, reports, model_under_test=model_under_test_facts)
    outputs: dict[str, str] = {}
    if settings.out:
        outputs = suite.write_outputs(Path(settings.out), samples.frame(), response_frame,
                                      judgment_frame, score_frame, provenance)
        main_output = outputs[suite.main_output]
        await acreate_link_artifact(
            key=f"outputs-{_slug(model)}-by-{_slug(judge)}",
            link=Path(main_output).resolve().as_uri(), link_text=Path(main_output).name,
            description=f"Exports of {model} judged by {judge}")
    record_path = write_run_record(
        settings, run_id=str(flow_run.id or uuid.uuid4()),
        flow="evaluate" if regenerate else "rejudge", started=started,
        seconds=time.monotonic() - clock, complete=complete, provenance=provenance,
        reports=reports, outputs=outputs, usage=usage,
        model_under_test=model_under_test_facts)
    logger.info("run record: %s", record_path)
    return {"scores": score_frame.to_dicts(), "complete": complete, "record": str(record_path),
            "coverage": suite.coverage(judgment_frame),
            "outputs": outputs, "stages": [r.as_dict() for r in reports], "usage": usage}


@flow(name="evaluate", flow_run_name=run_name, persist_result=False, validate_parameters=True)
async def evaluate(settings: RunSettings) -> dict[str, Any]:
    """Regenerate and judge every sample of the suite's data, then score each group."""
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
