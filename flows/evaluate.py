"""Prefect flows: `evaluate` (samples → responses → judgments → scores, for any suite) and
`rejudge` (judgments → scores over cached responses), wired by wiring.py.

One task per stage: a tracked task run costs milliseconds and a row in the UI, so the hundreds of
LLM calls of a stage run inside its task under an asyncio pool rather than as tasks of their own.
Prefect's result cache is off (its default policy keys on the run id, so it never reuses work
across runs); the stages own their content-addressed Parquet artifacts instead.
"""

from __future__ import annotations

# A deployment's worker starts its process by importing this module: its set-up first, before
# the imports of Prefect and litellm below (common/process.py).
from proactflow.common.process import tune_process

tune_process()

import uuid
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import acreate_link_artifact, acreate_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import deployment, flow_run

from proactflow.cache.artifacts import Artifact
from proactflow.common.postgres import check_database_url, default_database
from proactflow.config.settings import RunSettings
from proactflow.prefect_server.interrupted import note_flow_run
from proactflow.flows.wiring import (JudgmentsStage, ResponsesStage, SamplesStage, ScoresStage,
                                     judgments_stage, responses_stage, run_evaluation,
                                     samples_stage, scores_stage)
from proactflow.providers.litellm_setup import set_up_litellm
from proactflow.run.pipeline import StageReport
from proactflow.run.progress import Logger
from proactflow.stages.streaming import RowStream
from proactflow.suites.base import Prompts
from proactflow.suites.declarations import StageNames

samples_task = task(name="samples", cache_policy=NO_CACHE, persist_result=False)(samples_stage)


@task(name="responses", cache_policy=NO_CACHE, persist_result=False)
async def responses_task(settings: RunSettings, samples: Artifact, prompts: Prompts,
                         stream: RowStream | None = None) -> tuple[Artifact, StageReport]:
    return await responses_stage(settings, samples, prompts, get_run_logger(), stream)


@task(name="judgments", cache_policy=NO_CACHE, persist_result=False)
async def judgments_task(settings: RunSettings, samples: Artifact,
                         responses: Artifact | RowStream, generation_prompts: Prompts
                         ) -> tuple[Artifact, StageReport, Prompts]:
    return await judgments_stage(settings, samples, responses, generation_prompts,
                                 get_run_logger())


scores_task = task(name="scores", cache_policy=NO_CACHE, persist_result=False)(scores_stage)


def on_this_machine(settings: RunSettings) -> RunSettings:
    """A deployment's run uses the database its parameters name, unless the worker's own
    PROACTFLOW_DATABASE points at another one (a replica near the worker, say)."""
    own = default_database()
    if deployment.id is None or not own or own == settings.database:
        return settings
    return settings.model_copy(update={"database": check_database_url(own)})


class PrefectTracking:
    """The run as Prefect shows it: a task run per stage, the flow run's log, a table of the
    scores and a link to the exports."""

    def logger(self) -> Logger:
        return get_run_logger()

    def settings_here(self, settings: RunSettings) -> RunSettings:
        return on_this_machine(settings)

    def stages(self, names: StageNames
               ) -> tuple[SamplesStage, ResponsesStage, JudgmentsStage, ScoresStage]:
        # The UI shows each stage under the name of the table it writes.
        return (samples_task.with_options(name=names.samples),
                responses_task.with_options(name=names.responses),
                judgments_task.with_options(name=names.judgments),
                scores_task.with_options(name=names.scores))

    async def table(self, key: str, rows: list[dict[str, Any]], description: str) -> None:
        await acreate_table_artifact(key=key, table=rows, description=description)

    async def link(self, key: str, path: Path, description: str) -> None:
        await acreate_link_artifact(key=key, link=path.resolve().as_uri(), link_text=path.name,
                                    description=description)

    def run_id(self) -> str:
        return str(flow_run.id or uuid.uuid4())


def run_name() -> str:
    settings = flow_run.parameters.get("settings")
    if isinstance(settings, dict):
        settings = RunSettings.model_validate(settings)
    return f"{settings.model_under_test.model} judged by {settings.judge_name}"


@flow(name="evaluate", flow_run_name=run_name, persist_result=False, validate_parameters=True)
async def evaluate(settings: RunSettings) -> dict[str, Any]:
    """Regenerate and judge every sample of the suite's data, then score each group."""
    set_up_litellm()
    note_flow_run(flow_run.id)  # final on the server after a Ctrl-C
    return await run_evaluation(PrefectTracking(), settings, regenerate=True)


@flow(name="rejudge", flow_run_name=run_name, persist_result=False, validate_parameters=True)
async def rejudge(settings: RunSettings, triggers_key: str | None = None,
                  responses_key: str | None = None,
                  model_under_test_facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Judge the cached responses of a model again (new judge or prompt), then score them.
    With `triggers_key` and `responses_key`, judge those stored artifacts (e.g. an import),
    recording `model_under_test_facts` (what the responses artifact says) about their model."""
    set_up_litellm()
    stored = (triggers_key, responses_key) if triggers_key and responses_key else None
    note_flow_run(flow_run.id)
    return await run_evaluation(PrefectTracking(), settings, regenerate=False, stored=stored,
                                model_under_test_facts=model_under_test_facts)
