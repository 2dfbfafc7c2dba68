"""`python -m proactflow.sweeps.process_group [RUN_ID...]`: run a sweep's group of `evaluate`
flow runs, all at once on this process's event loop (process_groups.py starts it). The flow runs
exist already, under the sweep; their parameters come from the Prefect API at PREFECT_API_URL.

Without run ids on the command line, the process imports what a run needs, then reads them from
its standard input, one line: the sweep starts it before its checks, so that the seconds of
imports overlap them. Standard input is the sweep's pipe: end of file means the sweep's process
is gone (or needs this one no more), and this one stops as if interrupted."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import uuid
from typing import Any, cast


def _read_line() -> str:
    """A line of standard input, read from its descriptor: a thread blocked in the buffered
    reader would stop the interpreter's exit (it takes that reader's lock)."""
    line = b""
    while not line.endswith(b"\n") and (chunk := os.read(0, 1)):
        line += chunk
    return line.decode()


def _stop_when_orphaned() -> None:
    from ..prefect_server.interrupted import console_off

    while os.read(0, 4096):  # returns b"" at end of file only
        continue
    # The sweep's terminal is this process's too: Prefect's lines about the runs it stops
    # reach its server only, beside the one line the sweep prints.
    console_off()
    os.kill(os.getpid(), signal.SIGINT)


async def _run(ids: list[uuid.UUID]) -> int:
    from prefect import Flow, State
    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow_async

    from ..config.settings import RunSettings
    from ..flows.evaluate import evaluate

    # Started here, with asyncio's own SIGINT handler in place (it cancels this task): the
    # SIGINT it sends once the sweep closes our input lands nowhere else (in the set-up, it
    # printed a traceback; between making this coroutine and running it, a warning that it
    # was never awaited).
    threading.Thread(target=_stop_when_orphaned, daemon=True).start()
    async with get_client() as client:
        flow_runs = [await client.read_flow_run(run_id) for run_id in ids]
    engine_flow = cast("Flow[..., Any]", evaluate)  # the engine's return type is wider
    states = await asyncio.gather(*(
        run_flow_async(engine_flow, flow_run=run,
                       parameters={"settings": RunSettings.model_validate(
                           run.parameters["settings"])},
                       return_type="state")
        for run in flow_runs), return_exceptions=True)
    # Each run's state is on the server; the sweep reads them there.
    return 0 if all(isinstance(s, State) and s.is_completed() for s in states) else 1


def main(argv: list[str]) -> int:
    from ..run.progress import quiet_console_tracebacks
    from ..providers.litellm_setup import ready_for_calls

    if not argv:
        import prefect.flow_engine  # noqa: F401  (the imports a run needs, before its ids)

        from ..flows import evaluate  # noqa: F401

        argv = _read_line().split()
        if not argv:
            return 0  # the sweep ended, or needed this process no more
    quiet_console_tracebacks()
    ready_for_calls()
    try:
        return asyncio.run(_run([uuid.UUID(arg) for arg in argv]))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    from ..common.process import tune_process

    tune_process()  # this process's entry: before the imports of Prefect and litellm
    raise SystemExit(main(sys.argv[1:]))
