"""The thread that runs a local call cache's SQLite work, so that the event loop never waits on
SQLite, and commits it in groups.

A sweep's processes share one call cache (diskcache: SQLite files in the store). Run on the event
loop, every lookup, lease and store was a transaction of its own, and a transaction that found
another process's write lock slept in SQLite's busy handler, the whole loop with it: measured on
the 16-model benchmark, each of the two processes spent about 16 s of its 65 s of calls inside
those transactions, and its calls in flight stood still meanwhile. Here a thread of its own takes
the operations queued since its last round and runs them in one transaction per database (one
write lock taken, one commit), then hands each result back to its event loop. An operation's
result is handed back only after its commit, so an awaited store is as durable as before, and
each operation still runs whole inside a transaction: first-writer-wins and lease claims stay
exact across processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from typing import Any, Callable, ContextManager

_BATCH = 256
"""At most this many operations per transaction, so that a long queue never holds the write
lock for long against the other processes."""

Operation = tuple[Callable[[], Any], bool, asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # its caller was cancelled; the operation ran all the same
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


class CallThread:
    """Runs operations (functions of no arguments) for awaiting coroutines, in order, in
    batches; `transaction()` is entered around every batch that writes."""

    def __init__(self, transaction: Callable[[], ContextManager[Any]],
                 on_exit: Callable[[], None], name: str):
        self._transaction = transaction
        self._on_exit = on_exit  # runs on this thread: diskcache connections are per thread
        self._name = name
        # Each thread has its own queue: a thread started after a stop never takes the
        # stopping one's end marker.
        self._queue: queue.SimpleQueue[Operation | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    async def run(self, operation: Callable[[], Any], *, writes: bool) -> Any:
        """The result of `operation`, run on the thread (committed, when it `writes`). It is
        queued before this first waits, so a caller cancelled meanwhile still has it run (a
        lease given back on cancellation is given back)."""
        return await self.submit(operation, writes=writes)

    def submit(self, operation: Callable[[], Any], *, writes: bool) -> "asyncio.Future[Any]":
        """`operation` queued now; the future of its result (a future, not a coroutine, so a
        caller that must see it through a cancellation shields it without a task of its
        own)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._thread is None:  # started at the first operation, again after a stop
                self._queue = queue.SimpleQueue()
                self._thread = threading.Thread(target=self._serve, args=(self._queue,),
                                                name=self._name, daemon=True)
                self._thread.start()
            self._queue.put((operation, writes, loop, future))
        return future

    def stop(self) -> None:
        """Run what is queued, then end the thread (and wait for it)."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._queue.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _serve(self, pending: queue.SimpleQueue[Operation | None]) -> None:
        try:
            while True:
                batch = [pending.get()]
                while len(batch) < _BATCH:
                    try:
                        batch.append(pending.get_nowait())
                    except queue.Empty:
                        break
                work = [item for item in batch if item is not None]
                if work:
                    self._execute(work)
                if len(work) < len(batch):
                    return
        finally:
            self._on_exit()

    def _execute(self, work: list[Operation]) -> None:
        outcomes: list[tuple[Any, BaseException | None]] = []
        writes = any(item[1] for item in work)
        try:
            with self._transaction() if writes else contextlib.nullcontext():
                for operation, *_ in work:
                    try:
                        outcomes.append((operation(), None))
                    except Exception as exc:  # this operation's error, for its caller alone
                        outcomes.append((None, exc))
        except Exception as exc:  # the commit failed: nothing of the batch was stored
            outcomes = [(None, exc)] * len(work)
        for (_, _, loop, future), (value, error) in zip(work, outcomes):
            try:
                loop.call_soon_threadsafe(_settle, future, value, error)
            except RuntimeError:  # that loop is closed: nobody waits for this result
                continue
