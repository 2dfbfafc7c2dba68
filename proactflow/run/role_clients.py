"""The client a stage calls one role through, kept to that model's limits together with every
run calling it (calls in flight, requests and tokens per minute, across processes and hosts), or
through its provider's batch API. Apart from materialisation (pipeline.py): which of the limits,
the pacers and the batch transport a role's calls go through is decided here alone.
"""

from __future__ import annotations

from ..batches.roles import BATCH_WORKERS, batched, open_registry, open_transport
from ..cache.artifacts import ArtifactStore
from ..cache.calls import CallStore
from ..config.settings import ModelRole, RunSettings
from ..limits.inflight import model_limit
from ..limits.model_limits import target as limit_target
from ..limits.ratelimit import AdaptiveLimit, open_pacer
from ..providers.llm import ChatClient


def role_client(role: ModelRole, calls: CallStore, store: ArtifactStore, settings: RunSettings,
                table: str) -> ChatClient:
    """A client for one role, kept to its model's limits (`RuntimeOptions.limits`) together
    with every run calling that model: calls in flight in this process and across the
    processes sharing the store (or the database that `calls` lives in), --rpm/--tpm likewise;
    `table` (responses or judgments) says which `--refresh` applies."""
    limits = settings.runtime.limits(role)
    coordination = store.local_dir("coordination")
    target = limit_target(role.model, role.endpoint)
    assert limits.concurrency is not None  # the run's default fills it
    if batched(role):
        # A round of calls is one batch: neither --concurrency nor --rpm/--tpm holds it back.
        registry = open_registry(store.local_dir("batches"), settings.database)
        transport = open_transport(role, registry, settings.runtime,
                                   refresh=settings.refreshes(table))
        return ChatClient(role, calls, settings.runtime, in_flight=AdaptiveLimit(BATCH_WORKERS),
                          refresh=settings.refreshes(table), batched=transport.complete,
                          reply_kind="model" if table == "responses" else "judge")
    return ChatClient(
        role, calls, settings.runtime,
        request_pacer=open_pacer(calls, coordination, f"rpm|{target}", limits.rpm)
        if limits.rpm else None,
        token_pacer=open_pacer(calls, coordination, f"tpm|{target}", limits.tpm)
        if limits.tpm else None,
        in_flight=model_limit(target, limits.concurrency, calls, coordination, limits.share),
        refresh=settings.refreshes(table),
        reply_kind="model" if table == "responses" else "judge")
