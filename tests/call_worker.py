"""A process of its own on a call store, for the tests that need several (test_postgres.py).

    python call_worker.py hold SPEC KEY          claim KEY, say "claimed", then sleep until killed
    python call_worker.py call SPEC URL TEXT     say "ready", wait for a line, make one call
                                                 through a ChatClient, print its outcome (JSON)
    python call_worker.py judge SPEC URL TEXT N  as `call`, with a parser that rejects every reply,
                                                 asked up to N times (judge_parse_attempts)
    python call_worker.py free SPEC TARGET N    say "ready"; for each line read, say how many of
                                                 the N in-flight slots of TARGET it can take now,
                                                 then give them back
    python call_worker.py grab SPEC TARGET N    take the N in-flight slots of TARGET, say "held",
                                                 then sleep until killed
    python call_worker.py load SPEC URL NAME LIMIT N
                                                 say "ready", wait for a line, then make N calls
                                                 ("NAME i") to model m, 2 x LIMIT at once, kept
                                                 to LIMIT in flight by the model's shared limit
    python call_worker.py pace SPEC NAME RPM N SECONDS OUT
                                                 say "ready", wait for a line, then N coroutines
                                                 take slots of the pacer NAME for SECONDS and
                                                 write the times the calls started to OUT

SPEC is where the store lives: a PostgreSQL URL, or a local folder (the per-call cache in it,
the pacers in its sibling `coordination`). The line waited for lets the test start every process
at once, after their imports.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from pathlib import Path

from proactflow.cache.calls import CallStore, open_call_store
from proactflow.limits.ratelimit import Pacer, open_pacer


def is_database(spec: str) -> bool:
    return spec.startswith("postgresql://")


def store_for(spec: str) -> CallStore:
    return open_call_store("", spec) if is_database(spec) else open_call_store(spec)


def coordination_for(spec: str) -> Path:
    return Path("." if is_database(spec) else spec).parent / "coordination"


def pacer_for(store: CallStore, spec: str, name: str, per_minute: float) -> Pacer:
    return open_pacer(store, coordination_for(spec), name, per_minute)


async def hold(spec: str, key: str) -> None:
    store = store_for(spec)
    assert await store.claim(key, ttl=3600)
    print("claimed", flush=True)
    await asyncio.sleep(3600)


async def call(spec: str, url: str, text: str) -> None:
    from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
    from proactflow.providers.llm import ChatClient, ChatRequest

    role = ModelRole(model="openai/m", api_base=url,
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
    store = store_for(spec)
    client = ChatClient(role, store, RuntimeOptions(retry_base_delay_s=0.01))
    request = ChatRequest.build(role, [("user", text)])
    await store.get(request.key)  # connected before the start, as a running flow would be
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    outcome = await client.call(request)
    await store.close()
    print(json.dumps({"content": outcome.content, "from_cache": outcome.from_cache}), flush=True)


def unreadable(reply: str) -> str:
    raise ValueError(f"not a verdict: {reply[:20]}")


async def judge(spec: str, url: str, text: str, tries: int) -> None:
    from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
    from proactflow.providers.llm import ChatClient, ChatRequest

    role = ModelRole(model="openai/m", api_base=url,
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
    store = store_for(spec)
    client = ChatClient(role, store, RuntimeOptions(retry_base_delay_s=0.01,
                                                    judge_parse_attempts=tries))
    request = ChatRequest.build(role, [("user", text)])
    await store.get(request.key)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    outcome = await client.call(request, unreadable)
    await store.close()
    print(json.dumps({"status": outcome.status, "error": outcome.error}), flush=True)


async def free(spec: str, target: str, count: int) -> None:
    from proactflow.limits.inflight import model_limit

    store = store_for(spec)
    limit = model_limit(target, count, store, coordination_for(spec))
    await store.get("warm-up")
    print("ready", flush=True)
    while await asyncio.to_thread(sys.stdin.readline):
        taken = 0
        while taken < count and await limit._slots.take(count):
            taken += 1
        for _ in range(taken):
            limit._slots.give_back()
        await limit.settled()
        print(taken, flush=True)
    await store.close()


async def load(spec: str, url: str, name: str, ceiling: int, calls: int) -> None:
    from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
    from proactflow.limits.inflight import model_limit
    from proactflow.limits.model_limits import target
    from proactflow.providers.llm import ChatClient, ChatRequest

    role = ModelRole(model="openai/m", api_base=url,
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
    store = store_for(spec)
    await store.get("warm-up")
    limit = model_limit(target(role.model, role.endpoint), ceiling, store,
                        coordination_for(spec))
    client = ChatClient(role, store, RuntimeOptions(), in_flight=limit)
    pending = [ChatRequest.build(role, [("user", f"{name} {i}")]) for i in range(calls)]
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)

    async def worker() -> None:
        while pending:
            assert (await client.call(pending.pop(0))).ok

    await asyncio.gather(*(worker() for _ in range(2 * ceiling)))
    await store.close()
    print("done", flush=True)


async def grab(spec: str, target: str, count: int) -> None:
    from proactflow.limits.inflight import model_limit

    store = store_for(spec)
    limit = model_limit(target, count, store, coordination_for(spec))
    for _ in range(count):
        await limit.acquire()
    print("held", flush=True)
    await asyncio.sleep(3600)


async def pace(spec: str, name: str, per_minute: float, coroutines: int, seconds: float,
               out: str) -> None:
    store = store_for(spec)
    pacer = pacer_for(store, spec, name, per_minute)
    await store.get("warm-up")
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    stop = time.time() + seconds
    starts: list[float] = []

    async def caller() -> None:
        while True:
            await pacer.acquire()
            starts.append(time.time())
            await asyncio.sleep(random.uniform(0.05, 0.5))  # the call itself

    tasks = [asyncio.create_task(caller()) for _ in range(coroutines)]
    await asyncio.sleep(stop - time.time())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await store.close()
    Path(out).write_text(json.dumps([s for s in starts if s < stop]))


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "hold":
        asyncio.run(hold(rest[0], rest[1]))
    elif mode == "load":
        asyncio.run(load(rest[0], rest[1], rest[2], int(rest[3]), int(rest[4])))
    elif mode == "grab":
        asyncio.run(grab(rest[0], rest[1], int(rest[2])))
    elif mode == "free":
        asyncio.run(free(rest[0], rest[1], int(rest[2])))
    elif mode == "judge":
        asyncio.run(judge(rest[0], rest[1], rest[2], int(rest[3])))
    elif mode == "call":
        asyncio.run(call(rest[0], rest[1], rest[2]))
    else:
        asyncio.run(pace(rest[0], rest[1], float(rest[2]), int(rest[3]), float(rest[4]),
                         rest[5]))
