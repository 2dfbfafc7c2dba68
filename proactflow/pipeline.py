"""Stage materialisation: compute an artifact's key, reuse it when stored and final, otherwise
run the stage and store the output. The Prefect flows call these; so do `--dry-run` and `status`.

An artifact holding failures (error rows) is stored but marked incomplete: the next run computes
it again, and the per-call cache makes that cost only the calls that failed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from .cache.artifacts import Artifact, ArtifactSpec, ArtifactStore
from .cache.calls import CallStore, open_call_store
from .errors import UserError
from .endpoints import endpoint_fingerprint
from .chat import api_key_for
from .llm import ChatClient
from .ratelimit import open_pacer
from .schemas.arrow import conform
from .schemas.tables import JudgmentRow, PhaseScoreRow, ResponseRow, TriggerRow
from .settings import ModelRole, RunSettings
from .sources import CorpusFile, JudgePrompt, fetch_upstream_judge_prompt, locate_corpus, \
    read_judge_prompt_file
from .streaming import RowStream
from .stages import judgments, phase_scores, responses, triggers

@dataclass
class StageReport:
    """How one stage went in this run."""

    stage: str
    key: str
    reused: bool
    complete: bool
    seconds: float
    rows: int
    calls: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def with_endpoint_fingerprints(settings: RunSettings, roles: tuple[str, ...] = (
        "model_under_test", "judge")) -> RunSettings:
    """Each role with its own endpoint, with the fingerprint of the model that endpoint serves
    now (its /models entry), so a redeployed model gets new keys. Done at the start of every
    run, whoever starts it; a role whose endpoint lists no such model keeps none."""
    updates = {}
    for name in roles:
        role: ModelRole = getattr(settings, name)
        if role.api_base and role.endpoint_fingerprint is None:
            fingerprint = endpoint_fingerprint(role.api_base, role.model, api_key_for(role))
            if fingerprint is not None:
                updates[name] = role.model_copy(update={"endpoint_fingerprint": fingerprint})
    return settings.model_copy(update=updates) if updates else settings


def open_store(settings: RunSettings) -> ArtifactStore:
    return ArtifactStore(settings.store)


def open_call_cache(store: ArtifactStore, database: str | None = None) -> CallStore:
    """The per-call cache: in `database` (PostgreSQL, shared by every host) when given, else
    the store's own (`calls/`)."""
    return open_call_store(store.root / "calls", database)


def load_judge_prompt(settings: RunSettings, store: ArtifactStore) -> JudgePrompt:
    if settings.judge_prompt_file:
        return read_judge_prompt_file(settings.judge_prompt_file)
    return fetch_upstream_judge_prompt(store.root)


# Artifact specs: the key of each stage is a hash of everything below and nothing else.

def triggers_spec(settings: RunSettings, corpus_revision: str) -> ArtifactSpec:
    source = settings.corpus
    origin = None if source.path else f"{source.repo_id}/{source.filename}"
    return ArtifactSpec(triggers.STAGE, triggers.VERSION, {}, {
        "corpus_origin": origin, "corpus_revision": corpus_revision,
        "limit": source.limit, "phases": sorted(source.phases)})


def responses_spec(settings: RunSettings, triggers_key: str) -> ArtifactSpec:
    return ArtifactSpec(responses.STAGE, responses.VERSION, {"triggers": triggers_key}, {
        "model_under_test": settings.model_under_test.key_material(), "samples": settings.samples})


def judgments_spec(settings: RunSettings, responses_key: str, prompt_sha256: str) -> ArtifactSpec:
    return ArtifactSpec(judgments.STAGE, judgments.VERSION, {"responses": responses_key}, {
        "judge": settings.judge.key_material(), "judge_prompt_sha256": prompt_sha256,
        "response_format": settings.judge_response_format})


def phase_scores_spec(judgments_key: str) -> ArtifactSpec:
    return ArtifactSpec(phase_scores.STAGE, phase_scores.VERSION,
                        {"judgments": judgments_key}, {})


# Materialisation.

def materialize_triggers(settings: RunSettings, store: ArtifactStore,
                         corpus: CorpusFile | None = None) -> tuple[Artifact, StageReport]:
    """The triggers artifact; the corpus is parsed and validated only when it is not stored."""
    started = time.monotonic()
    corpus = corpus or locate_corpus(settings.corpus)
    spec = triggers_spec(settings, corpus.revision)
    found = store.get(spec)
    if found is not None:
        return found, StageReport(spec.stage, spec.key, True, True,
                                  time.monotonic() - started, found.frame().height)
    frame = triggers.build_triggers(corpus.rows(), limit=settings.corpus.limit,
                                    phases=settings.corpus.phases)
    if frame.is_empty():
        raise UserError(f"no triggers to evaluate in {corpus.description} for phases "
                        f"{','.join(settings.corpus.phases)}")
    artifact = store.put(spec, conform(frame, TriggerRow))
    return artifact, StageReport(spec.stage, spec.key, False, True,
                                 time.monotonic() - started, frame.height)


class Progress:
    """Logs `done/total` of a stage now and then: every 10 % (at least 10 rows) or 15 s."""

    def __init__(self, logger: logging.Logger | logging.LoggerAdapter, label: str, total: int):
        self.logger, self.label, self.total = logger, label, total
        self.done = self.failed = 0
        self._last_time = time.monotonic()
        self._last_done = 0

    def __call__(self, row: Any) -> None:
        self.done += 1
        if row.status in ("error", "judge_error"):
            self.failed += 1
        now = time.monotonic()
        step = max(10, self.total // 10)
        if self.done == self.total or self.done - self._last_done >= step \
                or now - self._last_time >= 15:
            self.logger.info("%s: %d/%d done, %d failed", self.label, self.done, self.total,
                             self.failed)
            self._last_time, self._last_done = now, self.done


def _client(role: ModelRole, calls: CallStore, settings: RunSettings, stage: str
            ) -> ChatClient:
    """A client for one role, paced by --rpm/--tpm across every run sharing the store (or the
    database that `calls` lives in)."""
    runtime = settings.runtime
    coordination = Path(settings.store).expanduser() / "coordination"
    target = f"{role.model}@{role.endpoint or 'provider'}"
    return ChatClient(
        role, calls, runtime,
        request_pacer=open_pacer(calls, coordination, f"rpm|{target}", runtime.rpm)
        if runtime.rpm else None,
        token_pacer=open_pacer(calls, coordination, f"tpm|{target}", runtime.tpm)
        if runtime.tpm else None,
        refresh=settings.refreshes(stage))


async def materialize_responses(settings: RunSettings, store: ArtifactStore, calls: CallStore,
                                triggers_artifact: Artifact,
                                logger: logging.Logger | logging.LoggerAdapter,
                                stream: RowStream | None = None
                                ) -> tuple[Artifact, StageReport]:
    """The responses artifact. With `stream`, every row is also handed to the judgments stage
    the moment it exists; the stream is closed at the end, or aborted if this stage fails."""
    started = time.monotonic()
    spec = responses_spec(settings, triggers_artifact.key)
    try:
        found = None if settings.refreshes(responses.STAGE) else store.get(spec)
        if found is not None and found.complete:
            frame = found.frame()
            if stream is not None:
                for row in frame.iter_rows(named=True):
                    stream.put(row)
                stream.close(True)
            return found, StageReport(spec.stage, spec.key, True, True,
                                      time.monotonic() - started, frame.height)
        trigger_frame = triggers_artifact.frame()
        client = _client(settings.model_under_test, calls, settings, responses.STAGE)
        progress = Progress(logger, f"responses of {settings.model_under_test.model}",
                            trigger_frame.height * settings.samples)

        def on_row(row: ResponseRow) -> None:
            progress(row)
            if stream is not None:
                stream.put(row.model_dump())

        frame = await responses.generate_responses(
            trigger_frame, settings.model_under_test, client, samples=settings.samples,
            concurrency=settings.runtime.concurrency, on_row=on_row)
        # Empty, truncated and blocked replies are the model's answers to these requests: final.
        complete = frame.filter(pl.col("status") == "error").is_empty()
        artifact = store.put(spec, conform(frame, ResponseRow), complete=complete)
    except BaseException:
        if stream is not None:
            stream.abort()
        raise
    if stream is not None:
        stream.close(complete)
    return artifact, StageReport(spec.stage, spec.key, False, complete,
                                 time.monotonic() - started, frame.height,
                                 client.stats.as_dict())


def responses_ready(settings: RunSettings, store: ArtifactStore, triggers_artifact: Artifact
                    ) -> Artifact | None:
    """The stored responses when they are complete (nothing to generate), else None."""
    if settings.refreshes(responses.STAGE):
        return None
    found = store.get(responses_spec(settings, triggers_artifact.key))
    return found if found is not None and found.complete else None


def responses_by_model(store: ArtifactStore) -> dict[str, tuple[str, str]]:
    """Model -> (triggers key, responses key) of its newest responses in the store, from runs and
    imports alike."""
    newest: dict[str, tuple[float, str, str]] = {}
    for path in (store.root / "artifacts" / responses.STAGE).glob("*.parquet"):
        triggers_key = store.key_material(path).get("inputs", {}).get("triggers")
        if not triggers_key or not store.path_for(triggers.STAGE, triggers_key).exists():
            continue
        head = pl.read_parquet(path, columns=["model"], n_rows=1)
        if head.is_empty():
            continue
        model, stamp = head["model"][0], path.stat().st_mtime
        if model not in newest or newest[model][0] < stamp:
            newest[model] = (stamp, triggers_key, path.stem)
    return {model: (t, r) for model, (_, t, r) in sorted(newest.items())}


def _without_fingerprint(material: dict[str, Any]) -> dict[str, Any]:
    role = dict(material.get("settings", {}).get("model_under_test") or {})
    role.pop("endpoint_fingerprint", None)
    return {**material, "settings": {**material.get("settings", {}), "model_under_test": role}}


def stored_responses(settings: RunSettings, store: ArtifactStore,
                     triggers_artifact: Artifact) -> Artifact:
    """The cached responses for these settings, for `rejudge`; a clear error when absent.

    The endpoint that produced them may since have been redeployed or shut down, so its model
    fingerprint may differ or be unknown now: the newest responses that match in everything but
    the fingerprint are then the ones meant.
    """
    spec = responses_spec(settings, triggers_artifact.key)
    found = store.get(spec)
    if found is None:
        wanted = _without_fingerprint(spec.material())
        matches = [path for path in (store.root / "artifacts" / spec.stage).glob("*.parquet")
                   if _without_fingerprint(store.key_material(path)) == wanted]
        if matches:
            newest = max(matches, key=lambda path: path.stat().st_mtime)
            found = store.get_by_key(spec.stage, newest.stem)
    if found is None:
        raise UserError(
            f"no cached responses of {settings.model_under_test.model} for these settings in "
            f"{store.root} (corpus, limit, phases, endpoint and generation settings must match "
            f"the run that produced them): run 'proactflow run' first")
    return found


async def materialize_judgments(settings: RunSettings, store: ArtifactStore, calls: CallStore,
                                triggers_artifact: Artifact, responses_in: Artifact | RowStream,
                                prompt: JudgePrompt,
                                logger: logging.Logger | logging.LoggerAdapter
                                ) -> tuple[Artifact, StageReport]:
    """The judgments artifact, from the stored responses or from a stream of them while the
    responses stage runs. Its key depends on the responses' key (which settings determine for a
    stream)."""
    started = time.monotonic()
    responses_key = responses_in.key if isinstance(responses_in, Artifact) \
        else responses_spec(settings, triggers_artifact.key).key
    spec = judgments_spec(settings, responses_key, prompt.sha256)
    if isinstance(responses_in, Artifact):
        found = None if settings.refreshes(judgments.STAGE) else store.get(spec)
        if found is not None and found.complete and responses_in.complete:
            return found, StageReport(spec.stage, spec.key, True, True,
                                      time.monotonic() - started, found.frame().height)
        stored = responses_in.frame()
        source: pl.DataFrame | RowStream = stored
        total = stored.height
    else:
        source = responses_in
        total = triggers_artifact.frame().height * settings.samples
    client = _client(settings.judge, calls, settings, judgments.STAGE)
    frame = await judgments.judge_responses(
        triggers_artifact.frame(), source, settings.judge, prompt, client,
        response_format=settings.judge_response_format,
        concurrency=settings.runtime.concurrency,
        on_row=Progress(logger, f"judgments by {settings.judge.model}", total))
    upstream_complete = responses_in.complete
    complete = upstream_complete and frame.filter(
        pl.col("status").is_in(["judge_error", "generation_error"])).is_empty()
    artifact = store.put(spec, conform(frame, JudgmentRow), complete=complete)
    return artifact, StageReport(spec.stage, spec.key, False, complete,
                                 time.monotonic() - started, frame.height,
                                 client.stats.as_dict())


def materialize_phase_scores(store: ArtifactStore, judgments_artifact: Artifact, *,
                             recompute: bool = False) -> tuple[Artifact, StageReport]:
    """The phase scores of a judgments artifact; `recompute` when the judgments were just
    written (a refresh rewrites an artifact under the same key)."""
    started = time.monotonic()
    spec = phase_scores_spec(judgments_artifact.key)
    found = None if recompute else store.get(spec)
    if found is not None and found.complete and judgments_artifact.complete:
        return found, StageReport(spec.stage, spec.key, True, True, time.monotonic() - started,
                                  found.frame().height)
    frame = phase_scores.score_phases(judgments_artifact.frame())
    artifact = store.put(spec, conform(frame, PhaseScoreRow),
                         complete=judgments_artifact.complete)
    return artifact, StageReport(spec.stage, spec.key, False, judgments_artifact.complete,
                                 time.monotonic() - started, frame.height)


ERROR_STATUS_COLUMNS = ("generation_errors", "judge_errors")


def coverage_problem(scores: list[dict[str, Any]], min_coverage: float | None) -> str | None:
    """Why a run's coverage is too low to call it a success, or None. With `min_coverage`, the
    share of triggers scored must reach it; without, no trigger may be lost to a failed call
    (empty, truncated or blocked replies are the model's answers, not failures)."""
    overall = next((row for row in scores if row["phase"] == "OVERALL"), None)
    if overall is None or not overall["triggers"]:
        return None
    scored, total = overall["evaluated"], overall["triggers"]
    if min_coverage is not None:
        if scored / total < min_coverage:
            return (f"coverage {scored}/{total} triggers scored ({scored / total:.1%}) is below "
                    f"--min-coverage {min_coverage:.1%}")
        return None
    lost = sum(overall[column] for column in ERROR_STATUS_COLUMNS)
    if lost:
        return (f"{lost} of {total} triggers not scored because calls failed "
                f"({overall['generation_errors']} generation, {overall['judge_errors']} judge): "
                "re-run to retry them, or accept with --min-coverage")
    return None
