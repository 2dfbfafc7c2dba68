"""Which roles of a run are batched, and the transport their calls go through."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

from ..common.errors import UserError
from ..common.redaction import redact_url
from ..config.settings import Generation, ModelRole, RuntimeOptions
from .probe import missing_batch_api
from .providers import ADAPTERS, batch_provider, provider_name
from .registry import BatchRecord, BatchRegistry, LocalBatchRegistry
from .transport import BatchTransport, PollSchedule

log = logging.getLogger("proactflow")

BATCH_WORKERS = 10_000
"""Calls of a batched role a stage keeps open at once (its pool's workers): a round of calls is
one batch, so the stage pools are not held to --concurrency (a provider batch takes 50,000)."""


def batched(role: ModelRole) -> bool:
    """Whether this role's calls go through its provider's batch API: always with --batch (the
    plan refused an endpoint without one), with --batch auto where its endpoint has one."""
    return role.batch == "on" or (role.batch == "auto" and provider_name(role) in ADAPTERS
                                  and missing_batch_api(role) is None)


def check_batch_roles(roles: dict[str, ModelRole], probe: bool = True) -> list[str]:
    """The plan's lines about batching; a one-line error, before any call, for a role asked to
    be batched whose provider has no batch API proactflow speaks or, with `probe`, whose
    endpoint has none (probe.py: read once per run)."""
    lines = []
    for name, role in roles.items():
        if role.batch == "off":
            continue
        provider = provider_name(role)
        label = name.replace("_", " ")
        missing = missing_batch_api(role) if probe and provider in ADAPTERS else None
        if provider in ADAPTERS and missing is None:
            lines.append(f"batch       {label} {role.model}: {provider}'s batch API")
        elif provider in ADAPTERS and role.batch == "auto":
            lines.append(f"batch       {label} {role.model}: interactive, its endpoint "
                         f"{role.endpoint} has no batch API ({missing}; --batch auto)")
        elif provider in ADAPTERS:
            raise UserError(
                f"--batch: the endpoint {role.endpoint} of {role.model} has no batch API "
                f"({missing}); use --batch auto to call it interactively there, or leave "
                "--batch out")
        elif role.batch == "auto":
            lines.append(f"batch       {label} {role.model}: interactive ({provider} has no "
                         "batch API proactflow speaks; --batch auto)")
        else:
            raise UserError(
                f"--batch: {role.model} ({provider}) has no batch API proactflow speaks (it "
                f"speaks {', '.join(sorted(ADAPTERS))}); use --batch auto to call it "
                "interactively, or leave --batch out")
    return lines


def open_registry(folder: Path, database: str | None = None) -> BatchRegistry:
    """The store's batch registry: in `database` when given (shared by hosts), else files in
    the store's `batches/` folder."""
    if database:
        from .registry_postgres import PostgresBatchRegistry
        return PostgresBatchRegistry(database)
    return LocalBatchRegistry(folder)


def open_transport(role: ModelRole, registry: BatchRegistry, runtime: RuntimeOptions,
                   refresh: bool = False) -> BatchTransport:
    provider = batch_provider(role)
    if provider is None:  # check_batch_roles refused it before any call
        raise UserError(f"--batch: {role.model} has no batch API proactflow speaks")
    schedule = PollSchedule(first_s=runtime.batch_poll_s,
                            gather_s=min(runtime.batch_gather_s, runtime.batch_poll_s))
    return BatchTransport(provider, registry, model=role.model, endpoint=role.endpoint,
                          schedule=schedule, on_progress=ProgressBoard(role.model).update,
                          api_base=redact_url(role.api_base) if role.api_base else None,
                          api_key_env=role.api_key_env, refresh=refresh)


def role_of(record: BatchRecord) -> ModelRole:
    """The role that made a batch, as far as reaching the batch goes (to cancel it)."""
    return ModelRole(model=record.model, api_base=record.api_base,
                     api_key_env=record.api_key_env,
                     generation=Generation(temperature=None, max_tokens=None, top_p=None))


class ProgressBoard:
    """A role's batches as they go: a line on the console per change, and a table artifact
    (`batches-<model>`) in the Prefect UI when the calls run inside a flow."""

    def __init__(self, model: str):
        self.model = model
        self.rows: dict[str, dict[str, object]] = {}

    async def update(self, record: BatchRecord) -> None:
        log.info("batch %s (%s): %d/%d lines done%s, %s", record.batch_id, record.model,
                 record.done, record.total,
                 f", {record.failed} failed" if record.failed else "", record.state)
        self.rows[record.tag] = {"batch": record.batch_id, "state": record.state,
                                 "lines done": record.done, "lines": record.total,
                                 "failed": record.failed, "provider": record.provider,
                                 "endpoint": record.endpoint or "(provider's default)"}
        await self._publish()

    async def _publish(self) -> None:
        if "prefect" not in sys.modules:
            return  # a run without a Prefect API never imports it (flows/wiring.py)
        from prefect.artifacts import acreate_table_artifact
        from prefect.context import FlowRunContext, TaskRunContext

        if FlowRunContext.get() is None and TaskRunContext.get() is None:
            return  # no flow run to show it in (a test, a script)
        slug = re.sub(r"[^a-z0-9]+", "-", self.model.lower()).strip("-")
        try:
            await acreate_table_artifact(
                key=f"batches-{slug}", table=list(self.rows.values()),
                description=f"Provider batches of **{self.model}**: lines done of each")
        except Exception as exc:  # the UI's table is a view: the run goes on without it
            log.debug("batches table not updated: %s", exc)
