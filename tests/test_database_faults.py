"""What a night brings to a run on a database (issue #31): a restart of the server mid-run,
backends terminated under two runs of the same work, the database gone for longer than the
run waits. Each request is counted at the fake endpoint: paid once, stored once, and a re-run
pays for nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from helpers import cli_args, run_cli
from replay import scaled_corpus
import warm_spawn


def paid(fake) -> Counter:
    """How often each distinct request reached the fake (its model and messages)."""
    return Counter(json.dumps([r["model"], r["messages"]], sort_keys=True)
                   for r in fake.requests)


def noise(err: str) -> list[str]:
    """Tracebacks and unheard task errors on stderr; not Prefect's console handler failing to
    write to an earlier test's captured stream, which is closed ("--- Logging error ---")."""
    found, in_logging_error = [], False
    for line in err.splitlines():
        if line.startswith("--- Logging error ---"):
            in_logging_error = True
        elif in_logging_error:
            in_logging_error = not line.startswith("Arguments:")
        elif "Traceback" in line or "never retrieved" in line:
            found.append(line)
    return found


def when_paid(fake, calls: int, deadline_s: float = 120) -> None:
    deadline = time.monotonic() + deadline_s
    while len(fake.requests) < calls:
        assert time.monotonic() < deadline, f"the run never made {calls} calls"
        time.sleep(0.005)


def test_a_run_through_two_restarts_pays_each_call_once(fake, tmp_path, postgres_server,
                                                       capsys):
    url = postgres_server.create_database()
    fake.latency = 0.05
    corpus, answerable = scaled_corpus(tmp_path, 4)
    args = cli_args(fake, tmp_path / "store", eval_model="openai/synth",
                    judge_model="openai/judge2", corpus=corpus,
                    extra=("--database", url, "--concurrency", "4", "--rpm", "60000",
                           "--out", str(tmp_path / "out")))
    restarts: list[tuple[int, float]] = []

    def restart_twice() -> None:
        for at in (answerable // 3, answerable):
            when_paid(fake, at)
            restarts.append((len(fake.requests), postgres_server.restart()))

    restarting = threading.Thread(target=restart_twice)
    restarting.start()
    code = run_cli("run", args)
    restarting.join(timeout=120)
    err = capsys.readouterr().err
    made = paid(fake)
    print(f"restarts at (calls, seconds) {restarts}: {sum(made.values())} paid, "
          f"{len(made)} distinct; exit {code}")
    assert code == 0, err[-2000:]
    assert len(restarts) == 2 and all(at < 2 * answerable for at, _ in restarts), restarts
    assert len(made) == 2 * answerable and set(made.values()) == {1}  # each paid once
    assert noise(err) == []

    fake.reset_counts()
    assert run_cli("run", args) == 0
    assert len(fake.requests) == 0  # everything paid was stored


def test_two_runs_with_backends_terminated_pay_each_call_once(fake, tmp_path, postgres_server,
                                                             prefect_server):
    url = postgres_server.create_database()
    fake.latency = 0.05
    corpus, answerable = scaled_corpus(tmp_path, 4)
    env = dict(os.environ, PREFECT_API_URL=prefect_server)

    def args(i: int) -> list[str]:
        return cli_args(fake, tmp_path / f"store{i}", eval_model="openai/synth",
                        judge_model="openai/judge2", corpus=corpus,
                        extra=("--database", url, "--concurrency", "4", "--rpm", "60000"))

    runs = [warm_spawn.Popen([sys.executable, "-m", "proactflow.cli", "run", *args(i)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) for i in range(2)]
    kills = []
    try:
        import asyncio

        import asyncpg

        async def terminate() -> int:
            outsider = await asyncpg.connect(url)
            try:
                return len(await outsider.fetch(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name LIKE 'proactflow%'"))
            finally:
                await outsider.close()

        for at in range(8, 2 * answerable, 2 * answerable // 6):  # 6 rounds, both runs live
            when_paid(fake, at)
            if any(run.poll() is not None for run in runs):
                break
            kills.append(asyncio.run(terminate()))
        outputs = [run.communicate(timeout=180)[0] for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
    made = paid(fake)
    codes = [run.returncode for run in runs]
    print(f"backends terminated {kills}: {sum(made.values())} paid, {len(made)} distinct; "
          f"exit {codes}")
    assert codes == [0, 0], [output[-2000:] for output in outputs]
    assert len(kills) >= 3 and sum(kills) > 0, kills
    assert len(made) == 2 * answerable and set(made.values()) == {1}, made.most_common(3)
    for output in outputs:
        assert noise(output) == [], output[-2000:]

    fake.reset_counts()
    assert run_cli("run", args(0)) == 0
    assert len(fake.requests) == 0


def test_a_database_away_longer_than_the_wait_stops_the_run_and_loses_nothing_paid(
        fake, tmp_path, postgres_server, capsys):
    """--database-wait 1 and the server stopped for 5 s mid-run: one line, exit 1 (calls were
    paid), the answers paid for kept in the store's folder; the next run delivers them to the
    database and pays for none of them again."""
    url = postgres_server.create_database()
    fake.latency = 0.05
    corpus, answerable = scaled_corpus(tmp_path, 3)
    store = tmp_path / "store"
    args = cli_args(fake, store, eval_model="openai/synth", judge_model="openai/judge2",
                    corpus=corpus, extra=("--database", url, "--concurrency", "4",
                                          "--rpm", "60000", "--database-wait", "1"))

    def away() -> None:
        when_paid(fake, answerable // 2)
        postgres_server.away(5)

    stopping = threading.Thread(target=away)
    stopping.start()
    try:
        code = run_cli("run", args)
    finally:
        stopping.join(timeout=120)
    err = capsys.readouterr().err
    first = paid(fake)
    print(f"database away: {sum(first.values())} paid, {len(first)} distinct; exit {code}")
    assert code == 1, err[-2000:]
    assert noise(err) == []
    lines = err.strip().splitlines()
    assert lines[-1].startswith("proactflow: error: database 127.0.0.1:") and \
        "not back within 1 s (--database-wait)" in lines[-1], lines[-3:]
    assert set(first.values()) == {1} and 0 < len(first) < 2 * answerable
    assert (store / "calls" / "database-pending").exists()

    fake.reset_counts()
    assert run_cli("run", args[:-2]) == 0
    again = paid(fake)
    print(f"the next run: {sum(again.values())} paid, {len(set(again) & set(first))} of them "
          "paid before")
    assert not set(again) & set(first)  # nothing paid twice
    assert len(again) + len(first) == 2 * answerable


def test_a_wait_says_what_it_waits_for_once_and_when_it_is_over(monkeypatch, capsys):
    """One line once the outage lasts (3 s; 0.1 s here), however many statements wait in it,
    one when the database is back; past the wait, DatabaseLost, which exits 1."""
    import asyncio

    from proactflow.cli import EXIT_DATABASE_LOST
    from proactflow.common import postgres_wait
    from proactflow.common.errors import DatabaseLost

    monkeypatch.setattr(postgres_wait, "ANNOUNCE_AFTER_S", 0.1)

    async def go() -> None:
        outage = postgres_wait.Outage("db.lan:5432/evals", 5)

        async def statement() -> None:
            for attempt in range(1, 6):  # 0.4 to 1.25 s
                await outage.pause(attempt, "lost the connection (terminated)")

        await asyncio.gather(*(statement() for _ in range(5)))
        outage.over()
        outage.wait_s = 0.6
        with pytest.raises(DatabaseLost, match=r"^database db.lan:5432/evals went away "
                                               r"mid-run \(lost the connection \(terminated\)\) "
                                               r"and was not back within 0.6 s"):
            while True:
                await outage.pause(1, "lost the connection (terminated)")

    asyncio.run(go())
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == ("proactflow: database db.lan:5432/evals went away mid-run (lost the "
                        "connection (terminated)): waiting up to 5 s for it to come back "
                        "(--database-wait)")
    assert lines[1].startswith("proactflow: database db.lan:5432/evals is back after ")
    assert len(lines) == 3 and lines[2] == lines[0].replace("5 s", "0.6 s")  # said once too
    assert EXIT_DATABASE_LOST == 1
    monkeypatch.setenv(postgres_wait.DATABASE_WAIT_ENV, "soon")
    from proactflow.common.errors import UserError
    with pytest.raises(UserError, match="PROACTFLOW_DATABASE_WAIT='soon': give a number"):
        postgres_wait.database_wait()
