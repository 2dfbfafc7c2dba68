"""Worker pools for a stage's calls: a fixed number of asyncio workers pulling items, so a
corpus of 624 samples never becomes 624 pending tasks."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from .streaming import StageAborted

T = TypeVar("T")


async def run_pool(take: Callable[[], Awaitable[Any]], worker: Callable[[Any], Awaitable[T]],
                   concurrency: int, on_result: Callable[[T], None] | None = None) -> list[T]:
    """Apply `worker` to items from `take()` (None ends) with `concurrency` workers.

    Results come in completion order. If a worker raises, the others are cancelled and the error
    propagates.
    """
    results: list[T] = []

    async def drain() -> None:
        while (item := await take()) is not None:
            result = await worker(item)
            results.append(result)
            if on_result is not None:
                on_result(result)

    workers = [asyncio.create_task(drain()) for _ in range(max(1, concurrency))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    return results


async def run_bounded(items: Sequence[Any], worker: Callable[[Any], Awaitable[T]],
                      concurrency: int,
                      on_result: Callable[[T], None] | None = None) -> list[T]:
    """`run_pool` over a list, with no more workers than items."""
    pending = iter(items)

    async def take() -> Any:
        return next(pending, None)

    return await run_pool(take, worker, min(concurrency, max(1, len(items))), on_result)


async def run_together(*coroutines: Awaitable[Any]) -> list[Any]:
    """Run coroutines at once and return their results in order; the first to raise cancels the
    others (a failing stage must not leave its sibling paying for calls) and its error
    propagates."""
    tasks = [asyncio.ensure_future(coroutine) for coroutine in coroutines]
    try:
        pending: set[asyncio.Future[Any]] = set(tasks)
        while pending:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            failed = [task.exception() for task in tasks
                      if task.done() and not task.cancelled() and task.exception() is not None]
            # A consumer stops (StageAborted) the moment its producer fails, often before the
            # producer's error is back from Prefect's task engine: wait for that error, the
            # cause, instead of reporting the consequence.
            causes = [exc for exc in failed if not isinstance(exc, StageAborted)]
            if causes or (failed and not pending):
                raise (causes or failed)[0]  # type: ignore[misc]
        return [task.result() for task in tasks]
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
