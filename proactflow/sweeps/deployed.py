"""Evaluations as runs of the `evaluate` deployment (a sweep file's `deployment`): each (model,
judge) goes to the work pool's workers, which may be on other machines, as a subflow run of
the sweep; the sweep waits for them, then reads what they left in the shared store.

The parameters a worker gets are the settings, which hold no secret: each worker reads the keys
from its own environment (the providers' variables, a role's `api_key_env`), the store's
credentials from AWS_*, and the database's password from PGPASSWORD or ~/.pgpass (its URL, user
name included, is in the parameters: it holds no password).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cache.keys import content_key
from ..common.errors import UserError
from ..config.settings import RunSettings
from ..run.pipeline import open_store, suite_of
from ..run.records import provenance_of
from ..run.run_records import read_records

POLL_SECONDS = 2.0
"""Between looks at the runs: one API call for all of them, plus one per queue still waiting."""
PAGE = 200
"""Flow runs read per request: the Prefect server's default and largest page."""
_EXCEPTION_PREFIX = re.compile(r"^Flow run encountered an exception: \w+: ")


class EvaluationFailed(Exception):
    """A deployment run that did not complete, with the reason its state gives."""


@dataclass(frozen=True)
class Submitted:
    """One pair handed to the pool: its flow run, and the queue it waits in."""

    settings: RunSettings
    run_id: uuid.UUID
    queue: str


def _fix_command(name: str) -> str:
    return f"prefect deploy --name {name.split('/', 1)[-1]}"


async def find_deployment(client: Any, name: str) -> Any:
    """The deployment `flow/deployment`, or a one-line UserError saying how to create it."""
    from prefect.exceptions import ObjectNotFound

    if "/" not in name:
        raise UserError(f"deployment {name!r}: give it as flow/deployment, e.g. "
                        "evaluate/evaluate")
    try:
        return await client.read_deployment_by_name(name)
    except ObjectNotFound:
        raise UserError(f"no deployment {name} on the Prefect server at "
                        f"{str(client.api_url).rstrip('/')}: "
                        f"create it with '{_fix_command(name)}' from the repository root "
                        "(prefect.yaml)") from None


def check_deployment(name: str) -> None:
    """`find_deployment` from synchronous code (the CLI, before the sweep starts); a server out
of reach is a one-line error too."""
    import httpx
    from prefect.client.orchestration import get_client

    async def look() -> None:
        async with get_client() as client:
            try:
                await find_deployment(client, name)
            except httpx.TransportError as exc:
                raise UserError(f"cannot reach the Prefect server at "
                                f"{str(client.api_url).rstrip('/')} ({exc or type(exc).__name__})"
                                ": start it ('prefect server start') or correct PREFECT_API_URL"
                                ) from None

    asyncio.run(look())


def worker_parameters(settings: RunSettings) -> dict[str, Any]:
    """What a worker gets: the settings without secrets, and without `out`, which names a folder
    of this machine (the sweep writes the exports itself, from the store)."""
    return {"settings": settings.model_copy(update={"out": None}).model_dump(mode="json")}


async def _submit(client: Any, name: str, sweep_id: str, index: int, settings: RunSettings,
                  queue: str | None) -> Submitted:
    from prefect.deployments import arun_deployment

    parameters = worker_parameters(settings)
    run = await arun_deployment(
        name, client=client, parameters=parameters, timeout=0, as_subflow=True,
        work_queue_name=queue,
        flow_run_name=f"{settings.model_under_test.model} judged by {settings.judge_name}",
        tags=[settings.suite, f"model:{settings.model_under_test.model}",
              f"judge:{settings.judge_name}"],
        # A retried sweep run finds the runs it made instead of making them again.
        idempotency_key=f"proactflow-sweep/{sweep_id}/{index}/{content_key(parameters)[:16]}")
    return Submitted(settings, run.id, run.work_queue_name or queue or "default")


async def _ensure_queue(client: Any, pool: str, queue: str) -> None:
    """Create a work queue the sweep names, before its runs: the server would create it with
    the first run, but runs sent at once then race to, and all but one fail (a unique key)."""
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    try:
        await client.read_work_queue_by_name(queue, work_pool_name=pool)
    except ObjectNotFound:
        try:
            await client.create_work_queue(name=queue, work_pool_name=pool)
        except ObjectAlreadyExists:  # a worker serving it made it meanwhile
            pass


def state_reason(state: Any) -> str:
    """Why a flow run ended as it did: its state message without Prefect's prefix, else the
    state's name."""
    message = (state.message or "").strip() if state is not None else ""
    return _EXCEPTION_PREFIX.sub("", message) or (state.name if state is not None else "lost")


async def _wait(client: Any, submitted: list[Submitted], pool: str, default_queue: str,
                timeout: float, logger: Any) -> dict[uuid.UUID, str | None]:
    """Run id -> None when it completed, else why not. A run still scheduled in a queue that no
    worker has polled for `timeout` seconds (counted from now at the earliest) is cancelled, so
    a worker started later does not run it unasked.

    Whether a worker polled is whether the queue's `last_polled` moved: that time is the
    server's clock, which this host's may be minutes off, so it is only ever compared with
    itself; the seconds without a move are counted here, on this host's monotonic clock."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.states import Cancelled

    polls: dict[str, tuple[Any, float]] = {}
    """Queue -> its `last_polled` when first seen so, and when (time.monotonic()) that was."""
    outcome: dict[uuid.UUID, str | None] = {}
    pending = {s.run_id: s for s in submitted}
    while pending:
        ids, runs = list(pending), []
        for start in range(0, len(ids), PAGE):  # the server answers at most PAGE at a time
            runs += await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=ids[start:start + PAGE])), limit=PAGE)
        for gone in set(ids) - {run.id for run in runs}:
            outcome[gone] = "its flow run was deleted"
            del pending[gone]
        waiting: dict[str, list[uuid.UUID]] = {}
        for run in runs:
            if run.state is not None and run.state.is_final():
                outcome[run.id] = None if run.state.is_completed() else state_reason(run.state)
                del pending[run.id]
            elif run.state is None or run.state.is_scheduled():
                waiting.setdefault(pending[run.id].queue, []).append(run.id)
        for queue, queued in waiting.items():
            found = await client.read_work_queue_by_name(queue, work_pool_name=pool)
            seen = polls.get(queue)
            if seen is None or seen[0] != found.last_polled:  # first look, or a worker polled
                polls[queue] = seen = (found.last_polled, time.monotonic())
            if time.monotonic() - seen[1] <= timeout:
                continue
            # A worker started without --work-queue serves every queue of the pool.
            command = f"prefect worker start --pool {pool}" + \
                ("" if queue == default_queue else f" --work-queue {queue}")
            reason = (f"no worker took it from work queue {queue!r} of pool {pool!r} in "
                      f"{timeout:g} s: start one with '{command}'")
            logger.error("%s", reason)
            for run_id in queued:
                await client.set_flow_run_state(run_id, Cancelled(message=reason), force=True)
                outcome[run_id] = reason
                del pending[run_id]
        if pending:
            await asyncio.sleep(POLL_SECONDS)
    return outcome


def evaluation_result(settings: RunSettings, run_id: uuid.UUID) -> dict[str, Any]:
    """What `evaluate` returns, rebuilt from the run record it left in the store; the pair's
    exports written here when the sweep has an `out`."""
    store, suite = open_store(settings), suite_of(settings)
    records = [r for r in read_records(store, run_id=str(run_id)) if r.run_id == str(run_id)]
    if not records:
        raise EvaluationFailed(
            f"it completed, but its run record is not in the store {store.url}: workers on "
            "other machines need a store they all reach (s3://...), not a local folder")
    record = records[-1].content
    names = suite.stages
    frames = {stage: store.get_by_key(stage, key).frame()
              for stage, key in record["artifacts"].items()}
    outputs: dict[str, str] = {}
    if settings.out:
        outputs = suite.write_outputs(
            Path(settings.out), frames[names.samples], frames[names.responses],
            frames[names.judgments], frames[names.scores], provenance_of(record))
    return {"scores": frames[names.scores].to_dicts(), "complete": record["complete"],
            "record": records[-1].location, "coverage": suite.coverage(frames[names.judgments]),
            "causes": suite.loss_causes(frames[names.judgments]),
            "outputs": outputs, "stages": record["stages"], "usage": record["usage"],
            "flow_run_id": str(run_id)}


async def run_evaluations(name: str, runs: list[RunSettings], queues: list[str | None],
                          timeout: float) -> list[dict[str, Any] | BaseException]:
    """Each pair as a run of deployment `name`, in order: its result, or why it has none. When
    no pair found a worker, a one-line UserError saying how to start one."""
    from prefect import get_run_logger
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    logger = get_run_logger()
    sweep_id = str(flow_run.id or uuid.uuid4())
    async with get_client() as client:
        deployment = await find_deployment(client, name)
        pool = deployment.work_pool_name
        for queue in sorted({q for q in queues if q}):
            await _ensure_queue(client, pool, queue)
        submitted = await asyncio.gather(*(
            _submit(client, name, sweep_id, index, settings, queue)
            for index, (settings, queue) in enumerate(zip(runs, queues))))
        clock = time.monotonic()
        logger.info("%d runs of %s sent to pool %s", len(submitted), name, pool)
        reasons = await _wait(client, submitted, pool, deployment.work_queue_name or "default",
                              timeout, logger)
    logger.info("deployment runs finished in %.1f s", time.monotonic() - clock)
    unserved = [r for r in reasons.values() if r and r.startswith("no worker took it")]
    if unserved and len(unserved) == len(submitted):
        raise UserError(unserved[0].replace("took it", "took the sweep's evaluations", 1))
    results: list[dict[str, Any] | BaseException] = []
    for sent in submitted:
        reason = reasons[sent.run_id]
        try:
            if reason is not None:
                raise EvaluationFailed(reason)
            results.append(evaluation_result(sent.settings, sent.run_id))
        except Exception as exc:  # listed with its reason, as a local subflow's failure is
            results.append(exc)
    return results
