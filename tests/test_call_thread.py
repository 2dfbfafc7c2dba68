"""The local call cache's own thread (cache/call_thread.py): the event loop never waits on
SQLite's locks, concurrent operations commit in groups, and a call costs two operations."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

from fake_openai import FakeOpenAI, Reply
from proactflow.cache.calls import CallCache, LocalCallStore, open_call_store
from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
from proactflow.providers.llm import ChatClient, ChatRequest
import warm_spawn


def test_the_loop_keeps_running_while_another_process_holds_the_write_lock(tmp_path):
    store = LocalCallStore(CallCache(tmp_path / "calls"))
    other = CallCache(tmp_path / "calls")  # its own connection, as another process has
    locked, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        with other._results.transact():
            locked.set()
            release.wait(5)

    async def main() -> tuple[int, float]:
        holder = threading.Thread(target=hold_the_lock)
        holder.start()
        locked.wait(5)
        put = asyncio.ensure_future(store.put("k", {"content": "x"}))
        ticks, started = 0, time.monotonic()
        while time.monotonic() - started < 0.5:  # the put waits for the lock meanwhile
            await asyncio.sleep(0.01)
            ticks += 1
        assert not put.done()
        release.set()
        await put
        holder.join()
        return ticks, time.monotonic() - started

    ticks, _ = asyncio.run(main())
    # About 50 when the put waits off the loop; 1 when SQLite's busy wait stopped the loop for
    # the whole 0.5 s. 10 leaves room for a loaded machine's late wake-ups.
    assert ticks >= 10, ticks
    assert CallCache(tmp_path / "calls").get("k") == {"content": "x"}


def test_concurrent_operations_commit_together(tmp_path):
    cache = CallCache(tmp_path / "calls")
    transactions = 0
    begin = cache._transaction

    def counted():
        nonlocal transactions
        transactions += 1
        return begin()

    cache.thread._transaction = counted
    store = LocalCallStore(cache)

    async def main() -> list[dict]:
        return await asyncio.gather(*(store.put(f"k{i}", {"i": i}) for i in range(200)))

    stored = asyncio.run(main())
    assert stored == [{"i": i} for i in range(200)]
    assert all(cache.get(f"k{i}") == {"i": i} for i in range(200))
    assert transactions < 50  # one per operation before


def test_a_release_is_made_even_when_its_caller_is_cancelled(tmp_path):
    cache = CallCache(tmp_path / "calls")
    store = LocalCallStore(cache)
    assert cache.claim("k", ttl=60)

    async def main() -> None:
        releasing = asyncio.ensure_future(store.release("k"))
        await asyncio.sleep(0)  # queued
        releasing.cancel()
        await store.get("k")  # after the release, in queue order

    asyncio.run(main())
    assert cache._leases.get("k") is None


def test_look_or_claim_returns_a_record_or_the_lease(tmp_path):
    cache = CallCache(tmp_path / "calls")
    cache.put("stored", {"content": "x"})
    assert cache.look_or_claim("stored", 60) == ({"content": "x"}, False)
    assert cache._leases.get("stored") is None  # a hit takes no lease
    assert cache.look_or_claim("new", 60) == (None, True)
    assert CallCache(tmp_path / "calls").look_or_claim("new", 60) == (None, False)  # held
    assert cache.look_or_claim("stored", 60, look=False) == (None, True)  # to replace it


def test_an_uncached_call_costs_two_operations_of_the_store(tmp_path):
    role = ModelRole(model="openai/m", generation=Generation(temperature=0.0, max_tokens=16,
                                                               top_p=None))
    with FakeOpenAI({"m": lambda _: Reply(content="fine")}) as fake:
        role = role.model_copy(update={"api_base": fake.url})
        cache = CallCache(tmp_path / "calls")
        client = ChatClient(role, cache, RuntimeOptions())
        operations = 0
        submit = cache.thread.submit

        def counted(operation, *, writes):
            nonlocal operations
            operations += 1
            return submit(operation, writes=writes)

        cache.thread.submit = counted
        outcome = asyncio.run(client.call(ChatRequest.build(role, [("user", "hi")])))
    assert outcome.content == "fine" and not outcome.from_cache
    assert operations == 2  # look-or-claim, then store-and-release
    assert cache._leases.get(outcome.request_key) is None


def test_stores_of_one_directory_share_one_cache_until_the_last_closes(tmp_path):
    first = open_call_store(tmp_path / "calls")
    second = open_call_store(tmp_path / "calls")
    assert isinstance(first, LocalCallStore) and isinstance(second, LocalCallStore)
    assert first.cache is second.cache
    asyncio.run(first.close())
    asyncio.run(second.put("k", {"content": "x"}))  # still open for the other
    asyncio.run(second.close())
    assert open_call_store(tmp_path / "calls").cache is not first.cache  # a new one


def test_a_prestarted_process_group_ends_quietly_when_no_runs_come():
    child = warm_spawn.Popen([sys.executable, "-m", "proactflow.sweeps.process_group"],
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    # An empty input: the sweep ended before its flow, or needed this process no more.
    _, errors = child.communicate(b"", timeout=120)
    assert child.returncode == 0 and errors.decode().strip() == ""


def test_a_closed_cache_serves_again_on_a_thread_of_its_own(tmp_path):
    cache = CallCache(tmp_path / "calls")
    store = LocalCallStore(cache)
    asyncio.run(store.put("a", {"content": "1"}))
    cache.close()  # its thread ends after what was queued
    asyncio.run(store.put("b", {"content": "2"}))  # a new thread, a new queue
    assert (cache.get("a"), cache.get("b")) == ({"content": "1"}, {"content": "2"})
    cache.close()
