"""The wiring of one evaluation (samples → responses → judgments → scores) and of a re-judging:
shared by the Prefect flows of evaluate.py and by a run that reports to no Prefect API.

A run without PREFECT_API_URL has nobody to report to: it calls the same stage functions and
the same wiring, in the command's process, without importing Prefect (about a second of CPU
and 36 MB) or starting a server for it (about 190 MB and 4 s of CPU, docs/benchmarks.md). Only
what Prefect itself shows is left out: the flow and task runs and their two artifacts, the
scores' table (the scores artifact is in the store) and a link to the exports (their paths are
in the run record). The stages' progress goes to the command's log. What the wiring needs from
Prefect, when there is one, is behind `Tracking`.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol

from proactflow.cache.artifacts import Artifact
from proactflow.config.settings import RunSettings
from proactflow.run.pipeline import (StageReport, materialize_judgments, materialize_responses,
                                     materialize_samples, materialize_scores, open_call_cache,
                                     open_store, responses_ready, stored_responses, suite_of)
from proactflow.run.progress import Logger
from proactflow.run.records import run_provenance, usage_and_cost, write_run_record
from proactflow.run.stage_keys import with_endpoint_fingerprints
from proactflow.stages.pools import run_together
from proactflow.stages.streaming import RowStream
from proactflow.suites.base import Prompts
from proactflow.suites.declarations import StageNames

SamplesStage = Callable[[RunSettings], tuple[Artifact, StageReport, str]]
ResponsesStage = Callable[..., Awaitable[tuple[Artifact, StageReport]]]
JudgmentsStage = Callable[..., Awaitable[tuple[Artifact, StageReport, Prompts]]]
ScoresStage = Callable[..., tuple[Artifact, StageReport]]


def samples_stage(settings: RunSettings) -> tuple[Artifact, StageReport, str]:
    suite, store = suite_of(settings), open_store(settings)
    source = suite.locate(settings, store)
    artifact, report = materialize_samples(suite, settings, store, source)
    return artifact, report, source.revision


async def responses_stage(settings: RunSettings, samples: Artifact, prompts: Prompts,
                          logger: Logger, stream: RowStream | None = None
                          ) -> tuple[Artifact, StageReport]:
    store = open_store(settings)
    calls = open_call_cache(store, settings.database)
    try:
        return await materialize_responses(suite_of(settings), settings, store, calls, samples,
                                           prompts, logger, stream)
    finally:
        await calls.close()


async def judgments_stage(settings: RunSettings, samples: Artifact,
                          responses: Artifact | RowStream, generation_prompts: Prompts,
                          logger: Logger) -> tuple[Artifact, StageReport, Prompts]:
    suite, store = suite_of(settings), open_store(settings)
    prompts = suite.judge_prompts(settings, store)
    calls = open_call_cache(store, settings.database)
    try:
        artifact, report = await materialize_judgments(suite, settings, store, calls, samples,
                                                       responses, generation_prompts, prompts,
                                                       logger)
    finally:
        await calls.close()
    return artifact, report, prompts


def scores_stage(settings: RunSettings, judgments: Artifact, recompute: bool = False
                 ) -> tuple[Artifact, StageReport]:
    return materialize_scores(suite_of(settings), open_store(settings), judgments,
                              recompute=recompute)


class Tracking(Protocol):
    """What the wiring asks of whoever watches the run: Prefect (evaluate.py) or nobody
    (`Untracked`)."""

    def logger(self) -> Logger:
        """The run's own log."""

    def settings_here(self, settings: RunSettings) -> RunSettings:
        """The settings as this machine runs them."""

    def stages(self, names: StageNames
               ) -> tuple[SamplesStage, ResponsesStage, JudgmentsStage, ScoresStage]:
        """The four stages, each shown under the name of the table it writes; the responses
        and judgments stages take the arguments of `responses_stage` and `judgments_stage`
        but the logger."""

    async def table(self, key: str, rows: list[dict[str, Any]], description: str) -> None:
        """Show the scores' table."""

    async def link(self, key: str, path: Path, description: str) -> None:
        """Show a link to the main export."""

    def run_id(self) -> str:
        """The id of the run record."""


class Untracked:
    """Nobody watches: the stages are called as they are, their progress goes to a logger of
    the command's (`proactflow.<table>`), the two artifacts only Prefect would show are not
    made, and the run record gets an id of its own."""

    def logger(self) -> Logger:
        return logging.getLogger("proactflow.run")

    def settings_here(self, settings: RunSettings) -> RunSettings:
        return settings

    def stages(self, names: StageNames
               ) -> tuple[SamplesStage, ResponsesStage, JudgmentsStage, ScoresStage]:
        def responses(settings: RunSettings, samples: Artifact, prompts: Prompts,
                      stream: RowStream | None = None
                      ) -> Awaitable[tuple[Artifact, StageReport]]:
            return responses_stage(settings, samples, prompts,
                                   logging.getLogger(f"proactflow.{names.responses}"), stream)

        def judgments(settings: RunSettings, samples: Artifact,
                      responses: Artifact | RowStream, generation_prompts: Prompts
                      ) -> Awaitable[tuple[Artifact, StageReport, Prompts]]:
            return judgments_stage(settings, samples, responses, generation_prompts,
                                   logging.getLogger(f"proactflow.{names.judgments}"))
        return samples_stage, responses, judgments, scores_stage

    async def table(self, key: str, rows: list[dict[str, Any]], description: str) -> None:
        pass

    async def link(self, key: str, path: Path, description: str) -> None:
        pass

    def run_id(self) -> str:
        return str(uuid.uuid4())


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "model"


async def run_evaluation(tracking: Tracking, settings: RunSettings, *, regenerate: bool,
                         stored: tuple[str, str] | None = None,
                         model_under_test_facts: dict[str, Any] | None = None
                         ) -> dict[str, Any]:
    """Wire the stages. `stored` names (samples key, responses key) already in the store, for
    re-judging responses that no run settings describe (imports)."""
    logger = tracking.logger()
    started = datetime.now(timezone.utc)
    clock = time.monotonic()
    settings = with_endpoint_fingerprints(
        tracking.settings_here(settings),
        ("model_under_test", "judge") if regenerate else ("judge",))
    suite, store = suite_of(settings), open_store(settings)
    names = suite.stages
    samples_of, responses_of, judgments_of, scores_of = tracking.stages(names)
    generation_prompts = suite.generation_prompts(settings, store) if stored is None \
        else Prompts()
    if stored is None:
        samples, samples_report, revision = samples_of(settings)
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
                responses_of(settings, samples, generation_prompts, stream),
                judgments_of(settings, samples, stream, generation_prompts))
        reports.append(responses_report)
    else:
        responses = ready
        if regenerate:  # reuses the artifact
            _, responses_report = await responses_of(settings, samples, generation_prompts)
            reports.append(responses_report)
        judgments, judgments_report, prompts = await judgments_of(
            settings, samples, responses, generation_prompts)
    scores, scores_report = scores_of(settings, judgments, recompute=not judgments_report.reused)
    reports += [judgments_report, scores_report]

    score_frame = scores.frame()
    response_frame, judgment_frame = responses.frame(), judgments.frame()
    complete = scores.complete
    model, judge = settings.model_under_test.model, settings.judge_name
    await tracking.table(
        f"{_slug(names.scores)}-{_slug(model)}-by-{_slug(judge)}", suite.summary_rows(score_frame),
        f"{suite.display_name} {names.scores.replace('_', ' ')} of **{model}** judged by "
        f"**{judge}**"
        + ("" if complete else " (incomplete: some calls failed; re-run to retry)"))
    usage = usage_and_cost(settings, response_frame, judgment_frame, reports)
    provenance = run_provenance(settings, {**generation_prompts.hashes(), **prompts.hashes()},
                                revision, reports, model_under_test=model_under_test_facts)
    outputs: dict[str, str] = {}
    if settings.out:
        outputs = suite.write_outputs(Path(settings.out), samples.frame(), response_frame,
                                      judgment_frame, score_frame, provenance)
        await tracking.link(f"outputs-{_slug(model)}-by-{_slug(judge)}",
                            Path(outputs[suite.main_output]),
                            f"Exports of {model} judged by {judge}")
    record_path = write_run_record(
        settings, run_id=tracking.run_id(), flow="evaluate" if regenerate else "rejudge",
        started=started, seconds=time.monotonic() - clock, complete=complete,
        provenance=provenance, reports=reports, outputs=outputs, usage=usage,
        model_under_test=model_under_test_facts)
    logger.info("run record: %s", record_path)
    return {"scores": score_frame.to_dicts(), "complete": complete, "record": str(record_path),
            "coverage": suite.coverage(judgment_frame),
            "causes": suite.loss_causes(judgment_frame),
            "outputs": outputs, "stages": [r.as_dict() for r in reports], "usage": usage}


async def evaluate_untracked(settings: RunSettings) -> dict[str, Any]:
    """The `evaluate` flow's work, reported to nobody."""
    return await run_evaluation(Untracked(), settings, regenerate=True)


async def rejudge_untracked(settings: RunSettings, triggers_key: str | None = None,
                            responses_key: str | None = None,
                            model_under_test_facts: dict[str, Any] | None = None
                            ) -> dict[str, Any]:
    """The `rejudge` flow's work, reported to nobody."""
    stored = (triggers_key, responses_key) if triggers_key and responses_key else None
    return await run_evaluation(Untracked(), settings, regenerate=False, stored=stored,
                                model_under_test_facts=model_under_test_facts)
