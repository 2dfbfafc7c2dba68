"""Leases, claims and slots against cancellation and lost connections (issue 20, A): a cancelled
caller leaves nothing held, a renewal never takes back a lease given back meanwhile, a killed
database backend neither aborts a stage's calls nor loses a paid answer, a failed group commit of
the local cache leaves no claim, and slots never re-attach a closed store."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import diskcache
import pytest

from call_worker import coordination_for, is_database, store_for
from fake_openai import FakeOpenAI, Reply
from proactflow.cache.calls import CallCache, LocalCallStore
from proactflow.cache.calls_postgres import PostgresCallStore, lock_id
from proactflow.common.errors import UserError

TESTS = str(Path(__file__).parent)
_CLAIM_ALL = """
import asyncio, sys
sys.path.insert(0, sys.argv[1])
from call_worker import store_for

async def main():
    store = store_for(sys.argv[2])
    taken = [await store.claim(key, ttl=60) for key in sys.argv[3:]]
    await store.close()
    print(sum(taken))

asyncio.run(main())
"""


@pytest.fixture(params=["local", "postgres"])
def backend(request, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "calls")
    return request.getfixturevalue("database")


def claimed_elsewhere(spec: str, keys: list[str]) -> int:
    """How many of `keys` another process claims at once."""
    done = subprocess.run([sys.executable, "-c", _CLAIM_ALL, TESTS, spec, *keys],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


async def server_locks(url: str) -> int:
    """Advisory locks held on the server by this database's sessions: leases and slots, not
    the locks that say a process is connected."""
    from proactflow.common.postgres_schema import PRESENCE_SPACE

    import asyncpg

    outsider = await asyncpg.connect(url)
    try:
        return await outsider.fetchval(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
            "WHERE l.locktype = 'advisory' AND d.datname = current_database() "
            "AND NOT (l.objsubid = 2 AND l.classid = $1::oid)", PRESENCE_SPACE)
    finally:
        await outsider.close()


def test_cancelled_claims_leave_nothing_held(backend):
    """Workers of a pool cancelled while their claims are under way (a sibling raised): every
    claim granted meanwhile is given back, so another process takes each key at once (not
    after the holder ends, nor after a lease's 60 s). On PostgreSQL the workers are cancelled
    at the moments that matter: a lock's round trip under way, and a second look after a
    claim; on the local cache, while claims wait for the cache's thread."""
    moments = ["locking", "looking again"] if is_database(backend) else [0, 0.001, 0.01]
    keys = {moment: [f"key {moment} {i}" for i in range(24)] for moment in moments}

    async def claim_and_work(store, key: str) -> None:
        record, claimed = await store.look_or_claim(key, 60)
        if claimed:  # as ChatClient.call does once the claim is back
            try:
                await asyncio.sleep(3600)  # the call, cancelled with its pool
            finally:
                await store.release(key)

    async def until(condition) -> None:
        deadline = time.monotonic() + 10
        while not condition():
            assert time.monotonic() < deadline, "the moment never came"
            await asyncio.sleep(0)

    async def go() -> None:
        store = store_for(backend)
        try:
            await store.get("warm-up")  # connected, as a running stage is
            for moment in moments:
                workers = [asyncio.create_task(claim_and_work(store, key))
                           for key in keys[moment]]
                if moment == "locking":
                    db = await store.database()
                    await until(lambda: db._lock_turn.locked() and -1 in db.held.values())
                elif moment == "looking again":
                    db = await store.database()
                    await until(lambda: any(g > 0 for g in db.held.values()))
                else:
                    await asyncio.sleep(moment)
                for worker in workers:
                    worker.cancel()
                outcomes = await asyncio.gather(*workers, return_exceptions=True)
                assert all(isinstance(o, asyncio.CancelledError) for o in outcomes), outcomes
            if isinstance(store, PostgresCallStore):
                assert (await store.database()).held == {}
                assert await server_locks(backend) == 0
        finally:
            await store.close()

    asyncio.run(go())
    every_key = [key for moment in moments for key in keys[moment]]
    assert claimed_elsewhere(backend, every_key) == len(every_key)


def test_a_renewal_round_never_takes_back_a_lease_given_back_meanwhile(database):
    """The leases' connection is lost with 40 leases held; during the renewal round that takes
    them back on a new connection, every one is given back. None stays held, in this process
    or on the server, and another process claims each at once."""
    import asyncpg

    keys = [f"lease {i}" for i in range(40)]

    async def go() -> None:
        store = store_for(database)
        outsider = await asyncpg.connect(database)
        try:
            for key in keys:
                assert await store.claim(key, ttl=60)
            await outsider.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE application_name = 'proactflow leases'")
            db = await store.database()
            generation = db._generation
            deadline = time.monotonic() + 10
            while db._generation == generation:  # connected again at once (issue #31)
                assert time.monotonic() < deadline, "the lost connection was never noticed"
                await asyncio.sleep(0.02)
            await asyncio.gather(*(store.renew(key, 60) for key in keys),
                                 *(store.release(key) for key in keys))
            assert db.held == {}
            assert await server_locks(database) == 0
        finally:
            await store.close()
            await outsider.close()

    asyncio.run(go())
    assert claimed_elsewhere(database, keys) == len(keys)


def test_killed_backends_mid_stage_lose_no_paid_answer(database):
    """Every backend of the run is killed (pg_terminate_backend) twice while 80 calls are under
    way: the calls all finish, every answer paid for is stored, and the next run pays for none
    of them."""
    import asyncpg

    from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
    from proactflow.providers.llm import ChatClient, ChatRequest
    from proactflow.stages.pools import run_bounded

    with FakeOpenAI({"m": lambda request: Reply(content="answer", delay=0.1)}) as fake:
        role = ModelRole(model="openai/m", api_base=fake.url,
                         generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
        requests = [ChatRequest.build(role, [("user", f"question {i}")]) for i in range(80)]
        answered_at_kills: list[int] = []

        async def run_stage(kill: bool) -> list:
            store = store_for(database)
            client = ChatClient(role, store, RuntimeOptions(retry_base_delay_s=0.01))
            outsider = await asyncpg.connect(database)

            async def killer() -> None:
                # Far apart: a statement is run again once, on a new connection.
                for answered in (10, 45):
                    while fake.calls["m"] < answered:
                        await asyncio.sleep(0.01)
                    answered_at_kills.append(fake.calls["m"])
                    await outsider.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name LIKE 'proactflow%'")

            try:
                killing = asyncio.create_task(killer()) if kill else None
                outcomes = await run_bounded(requests, client.call, 8)
                if killing is not None:
                    await killing
                return outcomes
            finally:
                await store.close()
                await outsider.close()

        first = asyncio.run(run_stage(kill=True))
        assert all(outcome.ok for outcome in first)
        assert all(0 < answered < 80 for answered in answered_at_kills), answered_at_kills
        paid = fake.calls["m"]
        assert paid == 80
        again = asyncio.run(run_stage(kill=False))
        assert fake.calls["m"] == paid  # nothing paid twice
        assert all(outcome.from_cache for outcome in again)


def test_a_non_idempotent_statement_on_a_lost_connection_is_one_line(database):
    """A statement that is not run again (a pacer's booking) reports its connection killed
    under it as a lost connection, in one line; the next statement gets a new connection."""
    import asyncpg

    async def go() -> None:
        store = store_for(database)
        outsider = await asyncpg.connect(database)
        try:
            db = await store.database()
            running = asyncio.create_task(db.fetchval("SELECT pg_sleep(30)"))
            await asyncio.sleep(0.3)
            await outsider.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE application_name = 'proactflow'")
            with pytest.raises(UserError, match=r"^database \S+ lost the connection \("):
                await asyncio.wait_for(running, 20)
            assert await db.fetchval("SELECT 1") == 1
        finally:
            await store.close()
            await outsider.close()

    asyncio.run(go())


def test_a_failed_commit_of_the_results_leaves_no_claim(tmp_path, monkeypatch):
    """The local cache commits results before leases: a group whose results' commit fails
    leaves none of its claims behind, so nobody waits for a lease no caller knows of."""
    cache = CallCache(tmp_path / "calls")
    real = cache._results.transact

    @contextlib.contextmanager
    def failing_commit(*args, **kwargs):
        with real(*args, **kwargs):
            yield
            raise sqlite3.OperationalError("disk I/O error")  # rolls the results back

    async def go() -> None:
        store = LocalCallStore(cache)
        try:
            monkeypatch.setattr(cache._results, "transact", failing_commit)
            with pytest.raises(sqlite3.OperationalError):
                await store.look_or_claim("the key", 60)
            monkeypatch.setattr(cache._results, "transact", real)
        finally:
            await store.close()

    asyncio.run(go())
    leases = diskcache.Cache(str(tmp_path / "calls" / "leases"))
    try:
        assert "the key" not in leases
    finally:
        leases.close()
    assert claimed_elsewhere(str(tmp_path / "calls"), ["the key"]) == 1


def test_slots_never_reattach_a_closed_store(database):
    """A model's slots outlive the store that first used them: a later store's calls use that
    store's connections, and once every store is closed no connection stays open."""
    import asyncpg

    from proactflow.limits.inflight import model_limit

    async def open_connections() -> int:
        outsider = await asyncpg.connect(database)
        try:
            return await outsider.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name LIKE 'proactflow%'")
        finally:
            await outsider.close()

    async def go() -> None:
        first = store_for(database)
        await first.get("warm-up")
        limit = model_limit("openai/m@x", 2, first, coordination_for(database))
        limit.release(await limit.acquire())
        await limit.settled()
        await first.close()

        second = store_for(database)
        await second.get("warm-up")
        assert model_limit("openai/m@x", 2, second, coordination_for(database)) is limit
        limit.release(await limit.acquire())
        await limit.settled()
        await second.close()
        deadline = time.monotonic() + 5
        while (still := await open_connections()) != 0:
            assert time.monotonic() < deadline, f"{still} connections left open"
            await asyncio.sleep(0.05)

    asyncio.run(go())
    assert is_database(database)


def test_a_claim_cancelled_twice_is_given_back_once_its_answer_arrives():
    """A caller cancelled again while it waits for its claim's answer does not wait longer:
    the claim is given back when the answer arrives, and a claim that failed gives back
    nothing."""
    from proactflow.common.cancellation import undone_if_cancelled

    async def go() -> None:
        given_back: list[str] = []
        answers = {key: asyncio.get_running_loop().create_future() for key in ("a", "b")}

        async def give_back(key: str) -> None:
            given_back.append(key)

        callers = [asyncio.create_task(undone_if_cancelled(
            answers[key], lambda taken, key=key: give_back(key) if taken else None))
            for key in ("a", "b")]
        await asyncio.sleep(0)
        for _ in range(2):
            for caller in callers:
                caller.cancel()
            await asyncio.sleep(0)
        outcomes = await asyncio.gather(*callers, return_exceptions=True)
        assert all(isinstance(o, asyncio.CancelledError) for o in outcomes)
        assert given_back == []
        answers["a"].set_result(True)
        answers["b"].set_exception(UserError("the claim failed"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert given_back == ["a"]

    asyncio.run(go())
