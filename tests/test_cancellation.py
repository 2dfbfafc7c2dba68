"""Every awaitable limit cancelled at random points under load (issue #31): the adaptive limit,
the shared slots, the pacers and the leases, on a local store and on PostgreSQL. Nothing raises
but the cancellation (the adaptive limit once raised ValueError for a waiter already popped),
no task error goes unheard ("Task exception was never retrieved"), and nothing stays held."""

from __future__ import annotations

import asyncio
import gc
import random
from pathlib import Path

import pytest

import proactflow
from call_worker import coordination_for, is_database, pacer_for, store_for
from proactflow.limits.inflight import model_limit
from proactflow.limits.ratelimit import AdaptiveLimit


@pytest.fixture(params=["local", "postgres"])
def backend(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "calls")
    return request.getfixturevalue("database")


def unheard(errors: list[dict]) -> list[str]:
    """What the loop reported about work of this project (a future, or a task running its code
    or this file's), each with the exception and the task or future that held it, so that a
    failure names its source. A library's client that an earlier test left as garbage is not
    this project's work: openai's AsyncClient, finalised while this loop runs, schedules its
    close here, and that close fails with "Event loop is closed" (its connections belong to the
    earlier test's loop)."""
    return [" | ".join(repr(context.get(part)) for part in ("message", "exception", "future",
                                                             "task", "source_traceback"))
            for context in errors if _ours(context.get("future") or context.get("task"))]


_OUR_CODE = (str(Path(proactflow.__file__).parent), __file__)


def _ours(future: object) -> bool:
    if not isinstance(future, asyncio.Task):
        return True  # a bare future: this project's call thread or limits made it
    code = getattr(future.get_coro(), "cr_code", None)
    return code is None or code.co_filename.startswith(_OUR_CODE)


def test_a_cancelled_waiter_of_the_adaptive_limit_raises_nothing_else():
    """10 callers on a limit of 4, the waiters cancelled after a release handed them a place
    or popped them: each ends cancelled, and the limit ends with nothing in flight."""

    async def go() -> None:
        limit = AdaptiveLimit(4)
        for _ in range(50):
            holders = [await limit.acquire() for _ in range(4)]
            waiters = [asyncio.create_task(limit.acquire()) for _ in range(6)]
            await asyncio.sleep(0)
            for waiter in waiters[:3]:
                waiter.cancel()  # cancelled before the releases below pop them
            for started in holders:
                limit.release(started)
            for waiter in waiters[3:]:
                waiter.cancel()  # a place handed over, then cancelled
            outcomes = await asyncio.gather(*waiters, return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, float):
                    limit.release(outcome)
                else:
                    assert isinstance(outcome, asyncio.CancelledError), outcome
            assert limit.in_flight == 0 and not limit._waiters

    asyncio.run(go())


def test_every_limit_cancelled_at_random_points_under_load(backend):
    rng = random.Random(31)
    keys = [f"cancel key {i}" for i in range(24)]
    errors: list[dict] = []

    async def go() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context:
                                                         errors.append(context))
        store = store_for(backend)
        await store.get("warm-up")
        limit = model_limit("openai/m@cancel", 4, store, coordination_for(backend))
        pacer = pacer_for(store, backend, "rpm|m@cancel", 60000)

        async def one_call(i: int) -> None:
            started = await limit.acquire()
            try:
                await pacer.acquire()
                key = keys[i % len(keys)]
                record, claimed = await store.look_or_claim(key, 60)
                if claimed:
                    try:
                        await asyncio.sleep(rng.uniform(0, 0.004))  # the call
                        if rng.random() < 0.3:
                            await store.renew(key, 60)
                        await pacer.settle(rng.uniform(-0.5, 0.5))
                    finally:
                        await store.release(key)
            finally:
                limit.release(started, rate_limited=rng.random() < 0.1)

        try:
            for _ in range(4):
                tasks = [asyncio.create_task(one_call(i)) for i in range(120)]
                while not all(task.done() for task in tasks):
                    await asyncio.sleep(rng.uniform(0, 0.003))
                    live = [task for task in tasks if not task.done()]
                    for task in rng.sample(live, k=min(len(live), rng.randint(0, 6))):
                        task.cancel()
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
                assert all(o is None or isinstance(o, asyncio.CancelledError)
                           for o in outcomes), [o for o in outcomes if o is not None
                                                and not isinstance(o, asyncio.CancelledError)]
                assert any(isinstance(o, asyncio.CancelledError) for o in outcomes)
                await limit.settled()
                assert limit.local.in_flight == 0 and not limit.local._waiters
                assert limit._slots._held == []
                if is_database(backend):
                    database = await store.database()
                    assert database.held == {}
                    for key in keys:  # every lease free: taken and given back at once
                        assert await store.claim(key, 60)
                        await store.release(key)
            gc.collect()
            await asyncio.sleep(0.05)
        finally:
            await pacer.close()
            await store.close()

    gc.collect()  # earlier tests' garbage is finalised here, where no loop runs
    asyncio.run(go())
    gc.collect()
    assert unheard(errors) == []


def test_only_asyncpgs_cancel_noise_is_dropped():
    """The filter installed with a database drops asyncpg's unheard CancelRequest future and
    nothing else: any other unheard exception still reaches the loop's handler."""
    from proactflow.common.postgres_errors import quiet_asyncpg_cancel_noise

    seen: list[str] = []
    loop = asyncio.new_event_loop()
    try:
        loop.set_exception_handler(lambda _, context: seen.append(repr(context["exception"])))
        quiet_asyncpg_cancel_noise(loop)
        quiet_asyncpg_cancel_noise(loop)  # once a loop
        for exception in (ConnectionError("unexpected connection_lost() call"),
                          ConnectionError("connection reset"), ValueError("mine")):
            loop.call_exception_handler({"message": "Future exception was never retrieved",
                                         "exception": exception})
    finally:
        loop.close()
    assert seen == ["ConnectionError('connection reset')", "ValueError('mine')"]
