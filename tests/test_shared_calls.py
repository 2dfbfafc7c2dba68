"""Calls, leases and rate limits shared by several processes, against both backends: the
store's own diskcache (one host) and PostgreSQL (`--database`, every host), on a real server.

Each process here is a real one (call_worker.py), started together once all have imported.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import warm_spawn

from call_worker import is_database, pacer_for, store_for
from fake_openai import FakeOpenAI, Reply
from proactflow.cache.calls_postgres import lock_id
from proactflow.common.errors import UserError
from proactflow.common.postgres import check_database_url

WORKER = str(Path(__file__).with_name("call_worker.py"))


@pytest.fixture(params=["local", "postgres"])
def backend(request, tmp_path) -> str:
    """Where a call store lives: a local folder, or a new PostgreSQL database."""
    if request.param == "local":
        return str(tmp_path / "calls")
    return request.getfixturevalue("database")


def start(*args: str) -> subprocess.Popen:
    return warm_spawn.Popen([sys.executable, WORKER, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def expect(process: subprocess.Popen, line: str) -> None:
    said = process.stdout.readline().strip()
    assert said == line, (said, process.stderr.read() if process.poll() is not None else "")


def stop_all(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def test_the_first_stored_answer_wins_and_a_refresh_replaces_it(backend):
    async def go():
        store = store_for(backend)
        try:
            assert await store.put("k", {"content": "first"}) == {"content": "first"}
            assert await store.put("k", {"content": "second"}) == {"content": "first"}
            assert await store.put("k", {"content": "third", "n": [1, 2.5, None]},
                                   replace=True) == {"content": "third", "n": [1, 2.5, None]}
            assert await store.get("k") == {"content": "third", "n": [1, 2.5, None]}
            assert await store.get("absent") is None
            keys = ["k", *(f"absent{i}" for i in range(1500))]
            assert await store.get_many(keys) == {"k": {"content": "third", "n": [1, 2.5, None]}}
        finally:
            await store.close()

    asyncio.run(go())


def test_a_lease_is_held_once_in_a_process_until_released(backend):
    async def go():
        first, second = store_for(backend), store_for(backend)
        try:
            assert await first.claim("k", ttl=60)
            assert not await first.claim("k", ttl=60)  # another task of this process has it
            assert not await second.claim("k", ttl=60)
            await first.renew("k", ttl=60)
            await first.release("k")
            assert await second.claim("k", ttl=60)
            await second.release("k")
        finally:
            await first.close()
            await second.close()

    asyncio.run(go())


def test_two_processes_claim_one_call_and_one_pays(backend):
    with FakeOpenAI({"m": lambda _: Reply(content="paid once", delay=1.0)}) as fake:
        workers = [start("call", backend, fake.url, "the same question") for _ in range(2)]
        try:
            for worker in workers:
                expect(worker, "ready")
            for worker in workers:  # both ask at once
                worker.stdin.write("go\n")
                worker.stdin.flush()
            outcomes = [json.loads(worker.communicate(timeout=60)[0]) for worker in workers]
        finally:
            stop_all(workers)
    assert fake.calls["m"] == 1
    assert [o["content"] for o in outcomes] == ["paid once", "paid once"]
    assert sorted(o["from_cache"] for o in outcomes) == [False, True]


def test_a_killed_holder_frees_its_claim_within_a_second_or_the_grace(backend):
    """On a local store, at once; on PostgreSQL, after the grace in which a holder that only
    lost its connection would be back (postgres_leases.py, issue #31)."""
    from proactflow.common.postgres_leases import LEASE_GRACE_S

    longest = LEASE_GRACE_S + 1.0 if is_database(backend) else 1.0
    holder = start("hold", backend, "the key")
    try:
        expect(holder, "claimed")

        async def take_over() -> float:
            store = store_for(backend)
            try:
                assert not await store.claim("the key", ttl=60)  # held by a live process
                holder.send_signal(signal.SIGKILL)  # no cleanup of any kind
                killed = time.monotonic()
                await asyncio.to_thread(holder.wait)  # its parent reaps it, as a shell would
                while not await store.claim("the key", ttl=60):
                    assert time.monotonic() - killed < longest + 4, "never freed"
                    await asyncio.sleep(0.01)
                return time.monotonic() - killed
            finally:
                await store.close()

        freed_after = asyncio.run(take_over())
    finally:
        stop_all([holder])
    print(f"{'postgres' if is_database(backend) else 'local'}: claim free "
          f"{freed_after * 1000:.0f} ms after kill -9")
    assert freed_after < longest


def test_a_deferral_and_a_settlement_reach_every_pacer_of_the_bucket(backend):
    async def go():
        store, second = store_for(backend), store_for(backend)
        try:
            mine = pacer_for(store, backend, "rpm|m", per_minute=6000)
            other = pacer_for(second, backend, "rpm|m", per_minute=6000)
            await mine.acquire()
            await mine.defer(0.5)  # a 429's Retry-After
            before = time.time()
            await other.acquire()
            waited = time.time() - before
            assert 0.4 < waited < 1.5, waited
            tokens = pacer_for(store, backend, "tpm|m", per_minute=600)
            await tokens.acquire(60)  # an estimate of 6 s worth of tokens...
            await tokens.settle(-60)  # ...that the usage showed was not spent
            before = time.time()
            await tokens.acquire(1)
            assert time.time() - before < 0.3
        finally:
            await store.close()
            await second.close()

    asyncio.run(go())


def window_counts(starts: list[float], stop: float) -> tuple[int, int]:
    """The most calls started in any 60 s window, and the fewest in one that ends before
    `stop`."""
    starts = sorted(starts)
    most = max(bisect.bisect_left(starts, s + 60) - i for i, s in enumerate(starts))
    fewest = min((bisect.bisect_right(starts, s + 60) - i - 1
                  for i, s in enumerate(starts) if s + 60 <= stop), default=0)
    return most, fewest


def test_four_processes_of_64_calls_keep_to_600_per_minute(tmp_path, database):
    """A little over one minute of calls (a window that starts with none, its processes late to
    start, counts as empty: the assertion then says so): the pacer has no windows of its own (each call books
    the next slot 60 x 1.01 / rpm seconds on), so the limit bites from the second call, and one
    sliding minute, the window a provider counts, is the shortest that shows it. A shorter window
    at a higher rate is the same arithmetic, but the margin that absorbs a late wake-up is 1 % of
    the window: 0.6 s over a minute, too little for a busy machine over a few seconds."""
    seconds, rpm = 66.0, 600  # 6 s for the first calls to start: a full window must fit
    backends = {"local": str(tmp_path / "calls"), "postgres": database}
    workers = {name: [start("pace", spec, "rpm|m@endpoint", str(rpm), "64", str(seconds),
                            str(tmp_path / f"{name}{i}.json")) for i in range(4)]
               for name, spec in backends.items()}
    everyone = [w for group in workers.values() for w in group]
    try:
        for worker in everyone:
            expect(worker, "ready")
        began = time.time()
        for worker in everyone:  # both backends at once: the suite waits for this once
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in everyone:
            _, err = worker.communicate(timeout=seconds + 60)
            assert worker.returncode == 0, err[-2000:]
    finally:
        stop_all(everyone)
    for name in backends:
        starts = [s for i in range(4) for s in json.loads(
            (tmp_path / f"{name}{i}.json").read_text())]
        most, fewest = window_counts(starts, began + seconds)
        print(f"{name}: {len(starts)} calls in {seconds:g} s; any 60 s window: {fewest} to "
              f"{most} calls")
        assert 0.95 * rpm <= fewest <= most <= rpm, (name, fewest, most)


def test_a_password_in_the_url_is_refused_and_never_repeated():
    for url in ("postgresql://bob:hunter22@db:5432/p", "postgresql://db/p?password=hunter22"):
        with pytest.raises(UserError) as refused:
            check_database_url(url)
        assert "PGPASSWORD" in str(refused.value) and "hunter22" not in str(refused.value)
    with pytest.raises(UserError, match="postgresql://user@host:port/db"):
        check_database_url("mysql://db/p")


def test_an_unreachable_database_is_one_line_naming_it(tmp_path):
    from ports import reserved_port

    async def go():
        store = store_for(f"postgresql://someone@127.0.0.1:{port}/proactflow")
        await store.get("k")

    with reserved_port() as port, pytest.raises(UserError) as failed:
        asyncio.run(go())
    assert str(failed.value) == (f"database 127.0.0.1:{port}/proactflow refused the connection: "
                                 "is PostgreSQL running there, on that port?")


def test_tables_are_made_on_first_use_and_a_newer_schema_is_refused(database):
    import asyncpg

    async def go():
        store = store_for(database)
        await store.put("k", {"content": "x"})
        await store.close()
        connection = await asyncpg.connect(database)
        try:
            version = await connection.fetchval("SELECT version FROM proactflow_schema")
            await connection.execute("UPDATE proactflow_schema SET version = 99")
        finally:
            await connection.close()
        store = store_for(database)
        try:
            await store.get("k")
        finally:
            await store.close()
        return version

    with pytest.raises(UserError, match="schema version 99, newer than this proactflow's 3"):
        asyncio.run(go())


def test_lost_leases_connection_is_taken_again(database):
    """A lease connection that drops (a network blip) frees the leases on the server; the next
    claim reconnects, and a renewal takes a held lease back."""
    import asyncpg

    async def go():
        store = store_for(database)
        outsider = await asyncpg.connect(database)
        try:
            assert await store.claim("k", ttl=60)
            await outsider.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                   "WHERE application_name = 'proactflow leases'")
            await asyncio.sleep(0.2)
            await store.renew("k", ttl=60)  # reconnects and takes it again
            taken = "SELECT pg_try_advisory_lock($1)"
            assert not await outsider.fetchval(taken, lock_id("k"))
            assert await store.claim("j", ttl=60)
            assert not await outsider.fetchval(taken, lock_id("j"))
        finally:
            await store.close()
            await outsider.close()

    asyncio.run(go())


def test_environment_names_the_database(monkeypatch, tmp_path):
    from proactflow.config.settings import Generation, ModelRole, RunSettings

    role = ModelRole(model="openai/m", generation=Generation(temperature=0, max_tokens=8,
                                                             top_p=None))
    monkeypatch.setenv("PROACTFLOW_DATABASE", "postgresql://carol@db.lan:5433/evals")
    settings = RunSettings(model_under_test=role, judge=role, store=str(tmp_path))
    assert settings.database == "postgresql://carol@db.lan:5433/evals"
    # Back through Prefect's parameters, as given: its user name is no secret.
    assert RunSettings.model_validate(settings.model_dump(mode="json")).database == \
        "postgresql://carol@db.lan:5433/evals"
    monkeypatch.delenv("PROACTFLOW_DATABASE")
    assert RunSettings(model_under_test=role, judge=role, store=str(tmp_path)).database is None
    assert os.environ.get("PROACTFLOW_DATABASE") is None
