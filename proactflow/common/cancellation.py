"""A round trip that obtains something (a claim, a lock) and whose answer may arrive after its
caller was cancelled: what it obtained is given back, never left held by nobody."""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, TypeVar

T = TypeVar("T")


async def undone_if_cancelled(operation: Awaitable[T],
                              undo: Callable[[T], Awaitable[None] | None]) -> T:
    """The result of `operation` (a claim or a lock: a round trip whose answer may arrive after
    its caller was cancelled). A cancelled caller waits for that answer and gives back what it
    obtained (`undo(result)`, None when there is nothing to give back) before the cancellation
    goes on: otherwise the server or the store keeps a claim that nobody in this process knows
    of, and every other process waits for it as long as this one lives."""
    running = asyncio.ensure_future(operation)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError as cancelled:
        try:
            obtained = await asyncio.shield(running)
        except asyncio.CancelledError:  # cancelled again: given back once the answer arrives
            running.add_done_callback(lambda done: _undo_later(done, undo))
            raise cancelled from None
        except Exception:  # the operation failed: it obtained nothing
            raise cancelled from None
        giving_back = undo(obtained)
        if giving_back is not None:
            # Cancelled again meanwhile, the giving back still ends; an error it ends with has
            # nobody to go to (the lease's time to live frees what it held).
            await shielded(giving_back)
        raise


_giving_back: set[asyncio.Future[None]] = set()


def _undo_later(done: asyncio.Future[T], undo: Callable[[T], Awaitable[None] | None]) -> None:
    if done.cancelled() or done.exception() is not None:
        return
    giving_back = undo(done.result())
    if giving_back is not None:
        task = asyncio.ensure_future(giving_back)
        _giving_back.add(task)  # kept until it ends: the loop holds only a weak reference
        task.add_done_callback(_giving_back.discard)
        task.add_done_callback(_drop_outcome)  # nobody awaits it: an error is not reported


async def shielded(operation: Awaitable[T]) -> T:
    """`operation` run to its end even when its caller is cancelled meanwhile (giving a lease
    back); an error it then ends with has nobody to go to and is dropped, instead of being
    reported as a task exception never retrieved."""
    running = asyncio.ensure_future(operation)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        running.add_done_callback(_drop_outcome)
        raise


def _drop_outcome(done: asyncio.Future[T]) -> None:
    if not done.cancelled():
        done.exception()
