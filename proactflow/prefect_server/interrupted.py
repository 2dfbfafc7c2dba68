"""What Prefect shows of a command stopped by Ctrl-C: every flow run of it final, the terminal
quiet.

Prefect's engine records a crash itself when its task is cancelled, but not reliably: an
in-process subflow cancelled with its parent can end with its state write cancelled too
(left RUNNING), and a pair whose process stopped before it started stays PENDING. So a command
notes the flow runs it starts (`note_flow_run`), and once it has stopped (its other processes
too) it settles them (`settle_flow_runs`): each one not final yet, and each of its subflows,
runs started in other processes included, becomes Crashed (it had started) or Cancelled (it
had not). A run of a deployment is left to its worker, where it goes on.
From the first Ctrl-C on, Prefect's own console lines (each task's "Crash detected!", each
run's "Finished in state") stay off the terminal (`console_off`): they still reach the server,
where the UI shows them beside the states; the command prints its one line.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from typing import Any

INTERRUPTED = "the command was interrupted (Ctrl-C)"
SETTLE_TIMEOUT_S = 15.0
"""How long settling may take: the server is local or near, and a command waits for it."""

_noted: list[uuid.UUID] = []


def note_flow_run(flow_run_id: Any) -> None:
    """A flow run this process started, to settle if the command is interrupted."""
    if flow_run_id is not None:
        _noted.append(uuid.UUID(str(flow_run_id)))


class _DropAll(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


def console_off() -> None:
    """Prefect's console handlers, on every logger, write nothing more to the terminal; its
    handler sending the lines to the server keeps them, and handlers of others (proactflow's
    own progress lines without a server) are left as they are. Nothing to do, and nothing
    imported, in a process where Prefect configured no logging."""
    if "prefect.logging.handlers" not in sys.modules:
        return
    loggers = [logging.getLogger(), *(logger for logger in
                                      logging.Logger.manager.loggerDict.values()
                                      if isinstance(logger, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if type(handler).__module__.startswith("prefect.") \
                    and isinstance(handler, logging.StreamHandler) \
                    and not any(isinstance(f, _DropAll) for f in handler.filters):
                handler.addFilter(_DropAll())


def settle_flow_runs() -> int:
    """Every noted flow run, and its subflows, that is not final yet made Crashed (it had
    started) or Cancelled (it had not); how many were. Bounded in time; a server that cannot
    be reached leaves them as they are (the command is ending anyway)."""
    if not _noted:
        return 0
    try:
        return asyncio.run(asyncio.wait_for(_settle(list(_noted)), SETTLE_TIMEOUT_S))
    except Exception:  # noqa: BLE001 - the server is away: nothing more to do here
        return 0


async def _settle(roots: list[uuid.UUID]) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.client.schemas.objects import State
    from prefect.states import Cancelled, Crashed

    settled = 0
    async with get_client() as client:
        runs = [await client.read_flow_run(run_id) for run_id in roots]
        seen = {run.id for run in runs}
        parents = list(seen)
        while parents:  # subflows, wherever they ran: the tree under each noted run
            children = await client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=parents)))
            parents = [child.id for child in children if child.id not in seen]
            seen.update(parents)
            runs += [child for child in children if child.id in parents]
        for run in runs:
            state = run.state
            if state is None or state.is_final() or run.deployment_id is not None:
                continue  # a deployment's run is its worker's: it goes on there
            started = state.is_running() or state.is_cancelling() or state.is_paused()
            new: State[Any] = Crashed(message=INTERRUPTED) if started else \
                Cancelled(message=f"{INTERRUPTED} before it started")
            await client.set_flow_run_state(run.id, new, force=True)
            settled += 1
    return settled
