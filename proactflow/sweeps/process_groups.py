"""A sweep's evaluations spread over processes of this machine (`processes` in a sweep file).

One event loop drives the calls of about `PAIRS_PER_PROCESS` evaluations before its CPU, not
the endpoints, sets the pace (docs/benchmarks.md). A larger sweep deals its pairs into groups,
one per process: the sweep's own process runs the first group as ordinary subflows, and a child
process each of the others, so that every core makes calls and no process sits idle holding a
copy of the libraries (a Python process with Prefect, litellm and polars loaded is ~250 MB):

- Each child's pairs get their flow runs here first, as subflows of the sweep (a tracking task
  run in the sweep, as Prefect makes for a subflow called in process), so the UI shows every
  pair under the sweep from the start. A child is given flow run ids only; it reads its runs'
  parameters from the Prefect API and executes them with Prefect's engine, on one event loop.
- The limits stay exact across the processes: a model's concurrency is slots on a file of the
  store (or advisory locks with `--database`), its rpm/tpm budget a row of the call cache, both
  shared by processes (inflight.py, slots.py). A model called from several groups (the judge)
  has its concurrency dealt between them too (`with_shares`): each group then finds a free
  slot at once instead of polling for one that another group just took back, which cost the
  16-model benchmark 14 % more CPU. The shares add up to the limit; other runs calling the
  model still share its slots with the sweep.
- Results come back through the store, as those of a deployment's runs do: each run leaves its
  record there and the sweep reads it (deployed.evaluation_result), writing the exports itself.
- A child's parameters show endpoint URLs with credentials redacted, as Prefect's UI does: the
  full values reach it through its environment (`_child_environment`).
- A child watches its standard input: when the sweep's process is gone, the pipe closes and the
  child stops as if interrupted, leaving the store consistent as any interrupted run does.
"""

from __future__ import annotations

import asyncio
import atexit
import math
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from .deployed import (EvaluationFailed, evaluation_result, state_reason,
                       worker_parameters)
from ..common.errors import UserError
from ..common.redaction import FULL_URLS_ENV, full_urls
from ..limits.model_limits import target as limit_target
from ..config.settings import RunSettings

PAIRS_PER_PROCESS = 4
"""Evaluations one event loop keeps fed at 32 calls in flight each and ~5 ms of CPU per call
(measured, benchmarks/sweep_benchmark.py): beyond that the loop is the bottleneck."""


def process_count(requested: int | None, pairs: int, cores: int | None = None) -> int:
    """The processes a sweep of `pairs` evaluations uses: as asked, else one per
    `PAIRS_PER_PROCESS` pairs up to the machine's cores; never more than the pairs."""
    if requested is not None:
        return max(1, min(requested, pairs))
    cores = cores or os.cpu_count() or 1
    return max(1, min(cores, math.ceil(pairs / PAIRS_PER_PROCESS)))


def groups(count: int, processes: int) -> list[list[int]]:
    """Pair indexes per process, dealt in turn: neighbours in the file (often one model judged
    by several judges, or similar models) land in different processes."""
    return [list(range(start, count, processes)) for start in range(processes)]


def with_shares(runs: list[RunSettings], plan: list[list[int]]) -> list[RunSettings]:
    """`runs` with the concurrency of each model called from several groups of `plan` dealt
    between those groups (the first ones get the remainder); a model with fewer slots than
    groups keeps its limit (the shared slots alone hold it). Limits enter no key."""
    callers: dict[str, list[int]] = {}
    for number, group in enumerate(plan):
        for index in group:
            for role in runs[index].roles.values():
                groups = callers.setdefault(limit_target(role.model, role.endpoint), [])
                if number not in groups:
                    groups.append(number)
    dealt = list(runs)
    for number, group in enumerate(plan):
        for index in group:
            settings, updates = runs[index], {}
            for name, role in settings.roles.items():
                groups = callers[limit_target(role.model, role.endpoint)]
                ceiling = settings.runtime.limits(role).concurrency or 1
                if len(groups) == 1 or ceiling < len(groups):
                    continue
                share = ceiling // len(groups) + \
                    (1 if groups.index(number) < ceiling % len(groups) else 0)
                updates[name] = role.model_copy(update={
                    "limits": role.limits.model_copy(update={"share": share})})
            if updates:
                dealt[index] = settings.model_copy(update=updates)
    return dealt


async def _create_runs(client: Any, runs: list[RunSettings]) -> list[uuid.UUID]:
    """A Pending flow run of `evaluate` per pair, each linked under the running sweep."""
    from prefect import Task
    from prefect.context import FlowRunContext
    from prefect.states import Pending

    from ..flows.evaluate import evaluate

    context = FlowRunContext.get()
    ids = []
    for settings in runs:
        parameters = worker_parameters(settings)
        tracker = Task(name=evaluate.name, fn=evaluate.fn, version=evaluate.version)
        task_run = await tracker.create_run(client=client, flow_run_context=context,
                                            parameters=parameters)
        run = await client.create_flow_run(
            flow=evaluate, parameters=parameters, state=Pending(),
            parent_task_run_id=task_run.id,
            name=f"{settings.model_under_test.model} judged by {settings.judge_name}",
            tags=[settings.suite, f"model:{settings.model_under_test.model}",
                  f"judge:{settings.judge_name}"])
        ids.append(run.id)
    return ids


_prestarted: list[subprocess.Popen[bytes]] = []
"""Children started before the sweep's flow (`prestart`), waiting for their run ids."""


def prestart(count: int, api_url: str, runs: list[RunSettings]) -> None:
    """Start `count` child processes now: their imports (about 5 s of CPU) overlap the sweep's
    checks, and they wait for their run ids on standard input. Those left unused stop when the
    sweep's process ends (their input closes)."""
    env = _child_environment(api_url, runs)
    _prestarted.extend(_spawn([], env) for _ in range(count))


def _spawn(ids: list[uuid.UUID], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A child in a session of its own: a terminal's Ctrl-C reaches the sweep's process only,
    which stops its children itself (closing their input) and waits for them before its
    Prefect server stops (`stop_children`), as an interrupted run stops."""
    if not _spawned:
        atexit.register(stop_children)  # after the server's: run before it
    child = subprocess.Popen([sys.executable, "-m", "proactflow.sweeps.process_group",
                              *map(str, ids)], stdin=subprocess.PIPE, env=env,
                             start_new_session=True)
    _spawned.append(child)
    return child


_spawned: list[subprocess.Popen[bytes]] = []
STOP_WAIT = 20.0
"""Seconds the sweep's process waits at its end for children told to stop."""


def stop_children() -> None:
    """Every child told to stop, and waited for (bounded): its runs' states are then on the
    server. Called again at exit, it finds them stopped."""
    for child in _spawned:
        _close(child)
    deadline = time.monotonic() + STOP_WAIT
    for child in _spawned:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()


def _children(planned: list[list[uuid.UUID]], env: dict[str, str]
              ) -> list[subprocess.Popen[bytes]]:
    """A running child per group of run ids: prestarted ones first, told their ids on their
    input; new ones for the rest. Prestarted children left over are told to stop."""
    children = [_prestarted_child(ids) or _spawn(ids, env) for ids in planned]
    while _prestarted:
        _close(_prestarted.pop())
    return children


def _prestarted_child(ids: list[uuid.UUID]) -> subprocess.Popen[bytes] | None:
    """A prestarted child still waiting, now told `ids`; None when none is left."""
    while _prestarted:
        child = _prestarted.pop(0)
        try:
            if child.poll() is None and child.stdin is not None:
                child.stdin.write(" ".join(map(str, ids)).encode() + b"\n")
                child.stdin.flush()
                return child
        except OSError:  # it ended between the look and the write
            pass
        _close(child)
    return None


def _close(child: subprocess.Popen[bytes]) -> None:
    if child.stdin is not None and not child.stdin.closed:
        try:
            child.stdin.close()  # a child still running stops; one waiting for ids ends
        except OSError:  # it had ended: nothing to tell it
            pass


async def _exit_status(child: subprocess.Popen[bytes]) -> int:
    # Polled: a thread per child blocked in wait() would hold one of the loop's executor
    # threads, which litellm uses for every call, for the whole sweep.
    while (code := child.poll()) is None:
        await asyncio.sleep(0.5)
    return code


def _child_environment(api_url: str, runs: list[RunSettings]) -> dict[str, str]:
    """The sweep's environment, with its server and the full values of what the runs'
    parameters show redacted: endpoint URLs holding credentials (userinfo, a query string),
    which a child would otherwise call masked."""
    env = dict(os.environ)
    env["PREFECT_API_URL"] = api_url  # the sweep's server, temporary or not
    try:
        env[FULL_URLS_ENV] = full_urls(
            (role.api_base for settings in runs for role in settings.roles.values()),
            "the evaluations cannot run in several processes (processes = 1)")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return env


async def run_in_processes(runs: list[RunSettings], processes: int, logger: Any
                           ) -> list[dict[str, Any] | BaseException]:
    """Each pair in one of `processes` processes, this one included: its result, or why it has
    none, in the order of `runs`."""
    from prefect.client.orchestration import get_client

    from ..flows.evaluate import evaluate

    plan = groups(len(runs), processes)
    runs = with_shares(runs, plan)
    own, *others = plan
    async with get_client() as client:
        ids = await _create_runs(client, [runs[i] for group in others for i in group])
        env = _child_environment(str(client.api_url), runs)
        run_ids = iter(ids)
        planned = [[(i, next(run_ids)) for i in group] for group in others]
        children = _children([[run_id for _, run_id in group] for group in planned], env)
        logger.info("%d evaluations in %d processes: %d here, the others in pids %s",
                    len(runs), processes, len(own),
                    ", ".join(str(child.pid) for child in children))
        try:
            here, *codes = await asyncio.gather(
                asyncio.gather(*(evaluate(settings=runs[i]) for i in own),
                               return_exceptions=True),
                *(_exit_status(child) for child in children))
        finally:
            for child in children:  # closing the pipe stops a child still running
                _close(child)
        results: dict[int, dict[str, Any] | BaseException] = dict(zip(own, here))
        for group, code in zip(planned, codes):
            for index, run_id in group:
                results[index] = await _outcome(client, runs[index], run_id, code)
    return [results[index] for index in range(len(runs))]


async def _outcome(client: Any, settings: RunSettings, run_id: uuid.UUID, exit_code: int
                   ) -> dict[str, Any] | BaseException:
    """What a child's run returned, rebuilt from its record in the store, or why it has none."""
    from prefect.states import Crashed

    run = await client.read_flow_run(run_id)
    try:
        if run.state is None or not run.state.is_final():
            reason = f"its process ended (exit status {exit_code}) first"
            await client.set_flow_run_state(run_id, Crashed(message=reason), force=True)
            raise EvaluationFailed(reason)
        if not run.state.is_completed():
            raise EvaluationFailed(state_reason(run.state))
        return evaluation_result(settings, run_id)
    except Exception as exc:  # listed with its reason, as an in-process failure is
        return exc
