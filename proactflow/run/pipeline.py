"""Stage materialisation, for every suite: ask an artifact's key (stage_keys.py), reuse it
when stored and final, otherwise run the stage, its calls through each role's client
(role_clients.py), and store the output. The Prefect flows call these; so do `--dry-run` and
`status`.

An artifact holding failures (error rows) is stored but marked incomplete: the next run computes
it again, and the per-call cache makes that cost only the calls that failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..cache.artifact import shared_samples
from ..cache.artifacts import Artifact, ArtifactSpec, ArtifactStore
from ..cache.calls import CallStore, open_call_store
from ..common.errors import UserError
from ..schemas.arrow import conform
from ..config.settings import RunSettings
from ..stages.judgments import judge_responses
from ..stages.responses import generate_responses
from .progress import Logger, Progress
from .role_clients import role_client
from .stage_keys import StageKeys, without_fingerprint
from ..stages.streaming import RowStream
from ..suites import get_suite
from ..suites.base import DataSource, Prompts, Suite


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


def suite_of(settings: RunSettings) -> Suite:
    return get_suite(settings.suite)


def open_store(settings: RunSettings) -> ArtifactStore:
    """The store as this run writes it: a --refresh writes new versions of the stage it asks
    again and of those computed from it, where any other writer keeps a complete output."""
    refreshing: frozenset[str] = frozenset()
    if settings.refresh is not None:
        names = suite_of(settings).stages
        chain = (names.responses, names.judgments, names.scores)
        refreshing = frozenset(chain[0 if settings.refresh in ("all", "responses") else 1:])
    return ArtifactStore(settings.store, refreshing=refreshing)


def open_call_cache(store: ArtifactStore, database: str | None = None) -> CallStore:
    """The per-call cache: in `database` (PostgreSQL, shared by every host) when given, else
    the store's own (`calls/`)."""
    return open_call_store(store.local_dir("calls"), database)


def _report(spec: ArtifactSpec, reused: bool, complete: bool, started: float, rows: int,
            calls: dict[str, int] | None = None) -> StageReport:
    return StageReport(spec.stage, spec.key, reused, complete, time.monotonic() - started, rows,
                       calls or {})


def _rows_expected(suite: Suite, samples: int) -> int | None:
    """Rows a stage will write: one per sample, or unknown before an interactive suite's
    environments have ended."""
    return None if suite.step_column else samples


def _incomplete(suite: Suite, frame: pl.DataFrame) -> bool:
    return not frame.filter(pl.col("status").is_in(list(suite.error_statuses))).is_empty()


# Materialisation.

def materialize_samples(suite: Suite, settings: RunSettings, store: ArtifactStore,
                        source: DataSource | None = None) -> tuple[Artifact, StageReport]:
    """The samples artifact; the data is parsed and validated only when it is not stored."""
    started = time.monotonic()
    source = source or suite.locate(settings, store)
    spec = StageKeys(suite, settings).samples(source)
    found = store.get(spec)
    # Samples' rows may be in this process already (shared_samples): their footer is looked at.
    if found is not None and found.still_stored():
        return found, _report(spec, True, True, started, shared_samples(found).height)
    frame = suite.build_samples(settings, source)
    artifact = store.put(spec, conform(frame, suite.tables.samples))
    return artifact, _report(spec, False, True, started, frame.height)



async def materialize_responses(suite: Suite, settings: RunSettings, store: ArtifactStore,
                                calls: CallStore, samples_artifact: Artifact, prompts: Prompts,
                                logger: Logger, stream: RowStream | None = None
                                ) -> tuple[Artifact, StageReport]:
    """The responses artifact. With `stream`, every row is also handed to the judgments stage
    the moment it exists; the stream is closed at the end, or aborted if this stage fails."""
    started = time.monotonic()
    spec = StageKeys(suite, settings).responses(samples_artifact.key, prompts)
    try:
        found = None if settings.refreshes("responses") else store.get(spec)
        # A stored output gc removed since it was chosen is computed again (from the call
        # cache), not a failed run.
        reused = found.rows_if_stored() if found is not None and found.complete else None
        if found is not None and reused is not None:
            frame = reused
            if stream is not None:
                for row in frame.iter_rows(named=True):
                    stream.put(row)
                stream.close(True)
            return found, _report(spec, True, True, started, frame.height)
        samples = shared_samples(samples_artifact)
        role = settings.model_under_test
        client = role_client(role, calls, store, settings, "responses")
        progress = Progress(logger, f"responses of {role.model}",
                            _rows_expected(suite, samples.height * settings.samples),
                            suite.error_statuses)

        def on_row(row: Any, dumped: dict[str, Any]) -> None:
            progress(row)
            if stream is not None:
                stream.put(dumped)  # also the episode's: neither changes it

        frame = await generate_responses(suite, samples, role, prompts, client,
                                         samples_per_item=settings.samples,
                                         concurrency=client.in_flight.ceiling, on_row=on_row)
        # Replies that are not answers are the model's answers to these requests: final.
        complete = not _incomplete(suite, frame)
        artifact = store.put(spec, conform(frame, suite.tables.responses), complete=complete)
    except BaseException:
        if stream is not None:
            stream.abort()
        raise
    if stream is not None:
        stream.close(complete)
    return artifact, _report(spec, False, complete, started, frame.height,
                             client.stats.as_dict())


def responses_ready(suite: Suite, settings: RunSettings, store: ArtifactStore,
                    samples_artifact: Artifact, prompts: Prompts) -> Artifact | None:
    """The stored responses when they are complete (nothing to generate), else None."""
    if settings.refreshes("responses"):
        return None
    found = store.get(StageKeys(suite, settings).responses(samples_artifact.key, prompts))
    # Gone since it was listed (gc): the responses stage computes it again from the call cache.
    return found if found is not None and found.complete and found.still_stored() else None


def stored_responses(suite: Suite, settings: RunSettings, store: ArtifactStore,
                     samples_artifact: Artifact, prompts: Prompts) -> Artifact:
    """The cached responses for these settings, for `rejudge`; a clear error when absent.

    The endpoint that produced them may since have been redeployed or shut down, so its model
    fingerprint may differ or be unknown now: the newest responses that match in everything but
    the fingerprint are then the ones meant.
    """
    spec = StageKeys(suite, settings).responses(samples_artifact.key, prompts)
    found = store.get(spec)
    if found is None:
        wanted = without_fingerprint(spec.material())
        matches = {key: stamp for key, stamp in store.keys(spec.stage).items()
                   if without_fingerprint(store.material(spec.stage, key)) == wanted}
        if matches:
            found = store.get_by_key(spec.stage, max(matches, key=matches.__getitem__))
    if found is None:
        raise UserError(
            f"no cached responses of {settings.model_under_test.model} for these settings in "
            f"{store.url} (data, selection, endpoint and generation settings must match "
            f"the run that produced them): run 'proactflow run' first")
    return found


async def materialize_judgments(suite: Suite, settings: RunSettings, store: ArtifactStore,
                                calls: CallStore, samples_artifact: Artifact,
                                responses_in: Artifact | RowStream, generation_prompts: Prompts,
                                prompts: Prompts, logger: Logger
                                ) -> tuple[Artifact, StageReport]:
    """The judgments artifact, from the stored responses or from a stream of them while the
    responses stage runs. Its key depends on the responses' key (which settings determine for a
    stream)."""
    started = time.monotonic()
    keys = StageKeys(suite, settings)
    spec = keys.judgments(responses_in.key, prompts) if isinstance(responses_in, Artifact) \
        else keys.chain(samples_artifact.key, generation_prompts, prompts)[1]
    samples = shared_samples(samples_artifact)
    source: pl.DataFrame | RowStream
    total: int | None
    if isinstance(responses_in, Artifact):
        found = None if settings.refreshes("judgments") else store.get(spec)
        reused = found.rows_if_stored() if found is not None and found.complete \
            and responses_in.complete else None
        if found is not None and reused is not None:
            return found, _report(spec, True, True, started, reused.height)
        source = responses_in.frame()
        total = None if suite.judges_episodes else source.height  # turns, not steps
    else:
        source, total = responses_in, _rows_expected(suite, samples.height * settings.samples)
    judge = settings.judge
    client = role_client(judge, calls, store, settings, "judgments") if judge is not None else None
    frame = await judge_responses(
        suite, samples, source, judge, prompts, client, settings,
        concurrency=client.in_flight.ceiling if client is not None
        else settings.runtime.concurrency,
        on_row=Progress(logger, f"judgments by {settings.judge_name}", total,
                        suite.error_statuses))
    complete = responses_in.complete and not _incomplete(suite, frame)
    artifact = store.put(spec, conform(frame, suite.tables.judgments), complete=complete)
    return artifact, _report(spec, False, complete, started, frame.height,
                             client.stats.as_dict() if client is not None else {})


def materialize_scores(suite: Suite, store: ArtifactStore, judgments_artifact: Artifact, *,
                       recompute: bool = False) -> tuple[Artifact, StageReport]:
    """The scores of a judgments artifact; `recompute` when the judgments were just written (a
    refresh writes a new version under the same key)."""
    started = time.monotonic()
    spec = StageKeys(suite).scores(judgments_artifact.key)
    found = None if recompute else store.get(spec)
    reused = found.rows_if_stored() if found is not None and found.complete \
        and judgments_artifact.complete else None
    if found is not None and reused is not None:
        return found, _report(spec, True, True, started, reused.height)
    frame = suite.score(judgments_artifact.frame())
    artifact = store.put(spec, conform(frame, suite.tables.scores),
                         complete=judgments_artifact.complete)
    return artifact, _report(spec, False, judgments_artifact.complete, started, frame.height)
