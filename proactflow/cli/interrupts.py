"""Exit statuses, and what Ctrl-C does to a command.

A terminal sends SIGINT to the command's whole process group. The temporary Prefect server and
a sweep's other processes run in sessions of their own, so the signal reaches the command's
process only, which stops them itself. What the first Ctrl-C does depends on where the
command is:

- While a flow runs (`run_interruptibly`): the flow's task is cancelled, as asyncio does on
  Ctrl-C. The calls in flight stop, what was finished stays stored, and the command ends with
  one line and exit status 130 (`main`). Prefect's console lines stop at once (they still
  reach its server); once the flow and the command's other processes have stopped, every flow
  run of the command is final on the server: Crashed, or Cancelled if it had not started.
- Before (imports, checks, the plan) or after: nothing is in flight and every write is
  atomic, so the command ends at once, with the same line and status. (A KeyboardInterrupt
  raised in the middle of an import can break a compiled extension's own import, which then
  prints a panic and its traceback: measured with pydantic_core.)

A second Ctrl-C ends the command at once: its temporary server is stopped without waiting, and
the process exits 130 without its exit handlers.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, Callable, Coroutine, TypeVar

T = TypeVar("T")

EXIT_LOW_COVERAGE = 1
EXIT_DATABASE_LOST = 1
"""The database went away mid-run and stayed away: calls may have been paid (never 2)."""
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130
INTERRUPTED = ("proactflow: interrupted. Finished calls are cached: run the same command again "
               "to continue.")

_interrupts = 0
_said = False
_cancel_flow: Callable[[], None] | None = None
"""Cancels the running flow's task, while one runs under `run_interruptibly`."""


def say_interrupted() -> None:
    """The one line an interrupted command prints (once)."""
    global _said
    if not _said:
        _said = True
        print(INTERRUPTED, file=sys.stderr, flush=True)
        # Only a process that sent batches has imported the transport (and litellm).
        transport = sys.modules.get("proactflow.batches.transport")
        live = getattr(transport, "LIVE", ())
        if live:
            print(f"proactflow: {len(live)} provider batches keep running (they are paid "
                  "for): the same command waits for them and reads their results; "
                  "'proactflow batches cancel --all' stops them.", file=sys.stderr, flush=True)


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    global _interrupts
    _interrupts += 1
    if _interrupts == 1 and _cancel_flow is not None:
        _prefect_console_off()
        _unawaited_quiet()
        _cancel_flow()
        return
    end_now()


def _prefect_console_off() -> None:
    """Prefect's lines about the runs it stops (each "Crash detected!") reach its server, not
    the terminal, where the command's one line says what happened."""
    try:
        from ..prefect_server.interrupted import console_off

        console_off()
    except Exception:  # noqa: BLE001 - lines on the terminal are no reason not to stop
        pass


def _unawaited_quiet() -> None:
    """Cancelling the flow can drop a coroutine a library made and had not awaited yet (anyio's
    attempt to connect, in Prefect's client, seen in a full test run): Python's warning that it
    was never awaited, with its source line, is no news on a terminal that was just told the
    command was interrupted."""
    import warnings

    warnings.filterwarnings("ignore", message=r"coroutine .* was never awaited",
                            category=RuntimeWarning)


def end_now() -> None:
    """The line, the temporary server stopped without waiting, exit status 130."""
    say_interrupted()
    try:
        # Looked up, not imported: a Ctrl-C can come while the module is still being imported
        # (a partly run module has no stop_at_once yet, and importing from it fails), and
        # until it has run whole no temporary server can have been started.
        api = sys.modules.get("proactflow.prefect_server.api")
        stop_at_once = getattr(api, "stop_at_once", None)
        if stop_at_once is not None:
            stop_at_once()
    finally:
        os._exit(EXIT_INTERRUPTED)


def handle_interrupts() -> None:
    """From now on, Ctrl-C as described above (in the main thread of the command's process,
    where Python's own handler is still in place)."""
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_interrupt)
        atexit.register(_exit_status_kept)  # the first registered: it runs last


def _exit_status_kept() -> None:
    """An interrupted command exits 130 once its exit handlers have run, with its line (a
    Ctrl-C that asked to cancel a flow as it was finishing let it finish: the command went on
    and ends here). (Python itself may end a process that met a KeyboardInterrupt by SIGINT,
    whatever `main` returned.)"""
    if _interrupts:
        say_interrupted()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)


def run_interruptibly(flow_run: Coroutine[Any, Any, T],
                      stop_others: Callable[[], None] | None = None) -> T:
    """`asyncio.run(flow_run)`, whose task a Ctrl-C cancels (KeyboardInterrupt once it has
    stopped). Without `handle_interrupts` (a caller inside a process of its own), as
    asyncio.run does. Once an interrupted flow has stopped, `stop_others` stops the command's
    other processes running its flows, and every flow run of the command that is not final yet
    is made so on the Prefect server (prefect_server/interrupted.py)."""
    import asyncio

    if signal.getsignal(signal.SIGINT) is not _on_interrupt:
        return asyncio.run(flow_run)

    async def cancellable() -> T:
        global _cancel_flow
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        assert task is not None

        def cancel() -> None:
            loop.call_soon_threadsafe(task.cancel)
        _cancel_flow = cancel
        try:
            return await flow_run
        finally:
            _cancel_flow = None

    try:
        return asyncio.run(cancellable())
    except asyncio.CancelledError:
        if _interrupts:
            raise KeyboardInterrupt from None
        raise
    finally:
        if _interrupts:
            _settle(stop_others)


def _settle(stop_others: Callable[[], None] | None) -> None:
    from ..prefect_server.interrupted import settle_flow_runs

    if stop_others is not None:
        stop_others()
    settle_flow_runs()


def interrupted() -> None:
    """The command is stopping after a Ctrl-C: say so; another one ends it at once."""
    global _interrupts
    if signal.getsignal(signal.SIGINT) is _on_interrupt:
        _interrupts = max(_interrupts, 1)
    say_interrupted()
