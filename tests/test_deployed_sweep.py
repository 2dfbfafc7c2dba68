"""A sweep whose evaluations run on Prefect workers, as across machines: a real `prefect server
start` (on the test PostgreSQL when there is one), the repository's prefect.yaml deployed with
`prefect deploy --name evaluate`, two `prefect worker start` processes, each with a folder and
state of its own, the store on S3 (SeaweedFS) and the calls in PostgreSQL when those servers can
start here (else a local folder and the store's own cache). One test puts the judge behind a
provider's limit on requests in a sliding window, which the sweep file's `rpm` keeps to only
when the two workers share one budget."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from datetime import datetime

import polars as pl
import pytest

from fake_openai import PerMinuteLimit, Reply
from helpers import gated_models
from prefect_cluster import (GPU_MODELS, evaluate_runs, local_cluster, local_leftovers, optional,
                             sweep, sweep_file, wait_until, worker_of)
from replay import (JUDGE_PROMPT, SAMPLE_CORPUS, scaled_corpus, synthetic_judge,
                    synthetic_model)
import warm_spawn

MODELS = ("gen", "synth", "synth2")
"""Two on work queue "gpu" (worker "w-gpu": two runs of one worker, each a process of its own),
one on "default" (worker "w-cpu"); "synth" and "synth2" answer alike, on different workers."""

# Each sweep waits for flow runs that Prefect's workers start as processes of their own (their
# imports included): on a loaded 2-core machine a test's two sweeps took over 300 s.
pytestmark = pytest.mark.timeout(600)


def _instant(text: str) -> datetime:
    """A time as the API writes it ("...Z", which datetime reads from Python 3.11 on only)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    """The server, the pool, the deployment and two workers (prefect_cluster.local_cluster), on
    the test PostgreSQL and SeaweedFS when those servers can start here."""
    postgres, seaweed = optional(request, "postgres_server"), optional(request, "seaweed")
    with local_cluster(tmp_path_factory.mktemp("cluster"), postgres, seaweed) as found:
        yield found


def sweep_every_model_ok(cluster, config, cwd, judge: str, models=MODELS
                         ) -> tuple[subprocess.CompletedProcess, float]:
    """The sweep run as a user would, and its wall seconds; it exits 0 with every model ok."""
    clock = time.monotonic()
    done = sweep(cluster, config, cwd)
    seconds = time.monotonic() - clock
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for model in models:
        assert f"ok      openai/{model} judged by openai/{judge}" in done.stdout
    return done, seconds

def test_a_sweep_on_two_workers(cluster, fake, tmp_path):
    fake.responders["synth2"] = synthetic_model
    # On S3 the call cache is PostgreSQL's (or each machine's own, which is not exact across
    # workers): S3 only with a database.
    seaweed = cluster["seaweed"] if cluster["database"] else None
    store = f"s3://{seaweed.bucket}/sweep-{uuid.uuid4().hex[:8]}" if seaweed \
        else str(tmp_path / "store")
    config = sweep_file(tmp_path / "sweep.toml", fake, cluster, store, MODELS)
    done, seconds = sweep_every_model_ok(cluster, config, tmp_path / "cwd", "judge2")
    # Every call once: 6 triggers of the first 2 dialogues per model; the two synthetic models
    # answer alike, so the judge is asked 6 + 6 different things, each once, whichever worker
    # asks first (synth's on w-gpu, synth2's on w-cpu).
    assert {m: fake.calls[m] for m in (*MODELS, "judge2")} == \
        {**{m: 6 for m in MODELS}, "judge2": 12}
    asked = [json.dumps([r["model"], r["messages"]]) for r in fake.requests]
    assert len(set(asked)) == len(asked)
    url = cluster["url"]
    runs = [r for r in evaluate_runs(url) if r["state"]["type"] == "COMPLETED"]
    assert len(runs) == len(MODELS)
    ran_on = {r["name"].split(" judged by ")[0]: worker_of(url, r) for r in runs}
    assert ran_on == {f"openai/{m}": "w-gpu" if m in GPU_MODELS else "w-cpu" for m in MODELS}
    assert all(r["parent_task_run_id"] for r in runs)  # subflows of the sweep in the UI
    sent = json.dumps([r["parameters"] for r in runs])  # what the workers were given
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert cluster["store_env"].get(name, "absent") not in sent
    if cluster["database"]:  # with its user name: no secret, and what the workers connect to
        assert cluster["database"] in sent
    assert len({r["infrastructure_pid"] for r in runs}) == len(MODELS)
    waited = [_instant(r["start_time"]) - _instant(r["expected_start_time"]) for r in runs]
    print(f"\nruns: {max(w.total_seconds() for w in waited):.1f} s at most from scheduled to "
          f"running, {max(r['total_run_time'] for r in runs):.1f} s at most running")
    print(f"2-worker sweep of {len(MODELS)} models: {seconds:.1f} s; calls "
          f"{dict(fake.calls)}; ran on {ran_on}; store {'S3' if seaweed else 'folder'}, "
          f"database {'PostgreSQL' if cluster['database'] else 'none'}")
    out = tmp_path / "out"
    board = pl.read_csv(out / "leaderboard.csv")
    assert sorted(board["model"].unique().to_list()) == sorted(f"openai/{m}" for m in MODELS)
    for model in MODELS:  # the pairs' exports, written by the sweep from the store
        metrics = json.loads((out / f"openai_{model}__openai_judge2" / "metrics.json")
                             .read_text())
        assert metrics
    assert "openai/synth2" in (out / "report.html").read_text()
    if seaweed:
        # The workers' folders and state, the sweep's folder: no artifact, record or store.
        assert not local_leftovers(cluster["root"], tmp_path / "cwd")

    fake.reset_counts()
    clock = time.monotonic()
    again = sweep(cluster, config, tmp_path / "cwd")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert sum(fake.calls.values()) == 0
    print(f"the same sweep again: {time.monotonic() - clock:.1f} s, no call")


JUDGE_RPM = 120
"""The sweep file's rpm for the judge: a slot every 0.505 s (1 % margin), 40 in any 20 s."""
JUDGE_WINDOW = 20.0
JUDGE_LIMIT = 52
"""The fake judge's limit: 429 above this many requests in the last JUDGE_WINDOW seconds. One
budget at JUDGE_RPM keeps within it with 12 requests to spare (6 s of a stalled process sending
late slots at once); each worker pacing alone at JUDGE_RPM sends 80 in 20 s while both judge.
A window of a third of a minute, not a whole one: the same test of one budget for both workers
in a third of the requests (a minute's window needs more than a minute of paced calls)."""
RPM_MODELS = ("synth", "synth2")
"""One pair on each worker ("synth" on queue "gpu"), each judged 45 times (the corpus 5 times
over): at JUDGE_RPM a worker pacing alone judges for 23 s, so two budgets go past JUDGE_LIMIT
when both judge at once, which the models' gate makes sure of (each answers only once both
were asked, however far apart the two flow-run processes started); one budget takes 45 s for
the 90."""


def test_a_rate_limited_judge_is_one_budget_for_both_workers(cluster, fake, tmp_path):
    """90 judge calls, 45 from each worker's pair, at the judge's rpm = 120: one budget for
    both (a pacer in the database, or in the folder store both workers share) keeps within the
    judge's 52 in 20 s; each worker pacing alone at 120 would send 80 in 20 s."""
    # Answers of their own (so are their judge requests), given once both runs have asked.
    # (A model's call times out after 60 s and more: its gate waits less, so no call is retried.)
    models, _, _, ungated = gated_models(*RPM_MODELS, wait=50)
    fake.responders.update(models)
    judge = fake.responders["judge-rpm"] = PerMinuteLimit(synthetic_judge, JUDGE_LIMIT,
                                                          window=JUDGE_WINDOW)
    corpus, per_model = scaled_corpus(tmp_path, 5)
    seaweed = cluster["seaweed"] if cluster["database"] else None
    store = f"s3://{seaweed.bucket}/rpm-{uuid.uuid4().hex[:8]}" if seaweed \
        else str(tmp_path / "store")
    config = sweep_file(tmp_path / "sweep.toml", fake, cluster, store, RPM_MODELS,
                        judge="judge-rpm", judge_extra=f"rpm = {JUDGE_RPM}", corpus=corpus,
                        limit=None)
    done, seconds = sweep_every_model_ok(cluster, config, tmp_path / "cwd", "judge-rpm",
                                         RPM_MODELS)
    assert not ungated, f"{ungated}: answered before the other run asked, not judged at once"
    assert judge.refused == 0, f"{judge.refused} requests answered 429"
    assert {m: fake.calls[m] for m in (*RPM_MODELS, "judge-rpm")} == \
        {**{m: per_model for m in RPM_MODELS}, "judge-rpm": len(RPM_MODELS) * per_model}
    asked = [json.dumps([r["model"], r["messages"]]) for r in fake.requests]
    assert len(set(asked)) == len(asked)  # each call once, whichever worker asked
    url = cluster["url"]
    runs = [r for r in evaluate_runs(url) if r["state"]["type"] == "COMPLETED"
            and r["name"].endswith(" judged by openai/judge-rpm")]
    assert len(runs) == len(RPM_MODELS)
    ran_on = {r["name"].split(" judged by ")[0]: worker_of(url, r) for r in runs}
    assert ran_on == {f"openai/{m}": "w-gpu" if m in GPU_MODELS else "w-cpu"
                      for m in RPM_MODELS}
    # The two workers' runs were running at once: their judge calls competed for one budget.
    spans = {w: [(r["start_time"], r["end_time"]) for r in runs if ran_on[
        r["name"].split(" judged by ")[0]] == w] for w in ("w-gpu", "w-cpu")}
    assert max(s for w in spans for s, _ in spans[w]) < min(e for w in spans for _, e in spans[w])
    if seaweed:
        assert not local_leftovers(cluster["root"], tmp_path / "cwd")
    print(f"\nrate-limited judge: {seconds:.1f} s for {fake.calls['judge-rpm']} judge calls at "
          f"rpm {JUDGE_RPM} (ideal {fake.calls['judge-rpm'] / JUDGE_RPM * 60:.0f} s); busiest "
          f"{JUDGE_WINDOW:g} s {judge.busiest} requests, limit {JUDGE_LIMIT}; 429s "
          f"{judge.refused}")
    # (That the same sweep again pays nothing, its pairs on both workers, is the two-worker
    # sweep's to show: here it would be two flow runs more, and no call to pace.)


def test_a_missing_deployment_is_one_line(cluster, fake, tmp_path):
    config = sweep_file(tmp_path / "sweep.toml", fake, cluster, str(tmp_path / "store"),
                        ("gen",))
    config.write_text(config.read_text().replace('"evaluate/evaluate"', '"evaluate/nightly"'))
    done = sweep(cluster, config, tmp_path / "cwd")
    assert done.returncode == 2
    assert done.stderr == (f"proactflow: error: no deployment evaluate/nightly on the Prefect "
                           f"server at {cluster['url']}: create it with 'prefect deploy --name "
                           "nightly' from the repository root (prefect.yaml)\n")


def test_no_worker_is_one_line_and_the_runs_are_cancelled(cluster, fake, tmp_path):
    config = sweep_file(tmp_path / "sweep.toml", fake, cluster, str(tmp_path / "store"),
                        ("gen", "synth"), extra="deployment_timeout = 3\n",
                        queue_of=lambda model: "nobody")
    done = sweep(cluster, config, tmp_path / "cwd")
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == (
        "proactflow: error: no worker took the sweep's evaluations from work queue 'nobody' of "
        "pool 'proactflow' in 3 s: start one with 'prefect worker start --pool proactflow "
        "--work-queue nobody'")
    assert sum(fake.calls.values()) == 0
    waiting = [r for r in evaluate_runs(cluster["url"]) if r["work_queue_name"] == "nobody"]
    assert len(waiting) == 2 and {r["state"]["type"] for r in waiting} == {"CANCELLED"}



def test_a_failed_evaluation_is_listed_with_its_reason(cluster, fake, tmp_path):
    fake.responders["locked"] = lambda request: Reply(status=401, content="invalid key")
    config = sweep_file(tmp_path / "sweep.toml", fake, cluster, str(tmp_path / "store"),
                        ("locked", "gen"))
    done = sweep(cluster, config, tmp_path / "cwd")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FAILED  openai/locked judged by openai/judge2: openai/locked: the provider " \
           "rejected the credentials" in done.stdout
    assert "ok      openai/gen judged by openai/judge2" in done.stdout


def test_a_pair_sent_twice_by_one_sweep_run_is_one_flow_run(cluster, fake, tmp_path):
    """The idempotency key: a retried sweep run finds the runs it made."""
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Cancelled

    from proactflow.sweeps.deployed import _submit
    from proactflow.sweeps.sweep_file import SweepConfig

    config = SweepConfig.model_validate({
        "deployment": "evaluate/evaluate", "store": str(tmp_path / "store"),
        "judges": [{"model": "openai/judge2", "api_base": fake.url}],
        "models": [{"model": "openai/gen", "api_base": fake.url, "work_queue": "later"}]})

    async def twice() -> list:
        async with get_client() as client:
            runs = [await _submit(client, config.deployment, "sweep-1", 0, config.runs()[0],
                                  "later") for _ in range(2)]
            await client.set_flow_run_state(runs[0].run_id, Cancelled(), force=True)
            return runs

    with temporary_settings({PREFECT_API_URL: cluster["url"]}):
        first, second = asyncio.run(twice())
    assert first.run_id == second.run_id


def test_a_deleted_run_fails_its_pair_and_the_sweep_ends(cluster, fake, tmp_path):
    """What docs/across-machines.md says to do with a run whose worker's machine vanished."""
    config = sweep_file(tmp_path / "sweep.toml", fake, cluster, str(tmp_path / "store"),
                        ("gen",), queue_of=lambda model: "vanished")
    (tmp_path / "cwd").mkdir()
    env = dict(cluster["env"], PREFECT_HOME=str(tmp_path / "cwd" / "home"))
    running = warm_spawn.Popen([sys.executable, "-m", "proactflow.cli", "sweep", "--config",
                                str(config)], cwd=tmp_path / "cwd", env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        def sent() -> list[dict]:
            return [r for r in evaluate_runs(cluster["url"])
                    if r["work_queue_name"] == "vanished"]

        wait_until(lambda: bool(sent()), "the sweep's run", running, skip=False)
        request = urllib.request.Request(f"{cluster['url']}/flow_runs/{sent()[0]['id']}",
                                         method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()
        out, _ = running.communicate(timeout=120)
    finally:
        running.kill()
    assert running.returncode == 1
    assert "FAILED  openai/gen judged by openai/judge2: its flow run was deleted" in out



def _skewed(monkeypatch, hours: float) -> None:
    """This host's clock `hours` off the server's, as `deployed` reads it."""
    from datetime import timedelta, timezone

    from proactflow.sweeps import deployed

    class Skewed(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.now(tz or timezone.utc) + timedelta(hours=hours)

    monkeypatch.setattr(deployed, "datetime", Skewed, raising=False)


def _one_pair(fake, tmp_path):
    from proactflow.sweeps.sweep_file import SweepConfig

    return SweepConfig.model_validate({
        "deployment": "evaluate/evaluate", "store": str(tmp_path / "store"),
        "corpus": str(SAMPLE_CORPUS), "judge_prompt": str(JUDGE_PROMPT), "limit": 1,
        "judges": [{"model": "openai/judge2", "api_base": fake.url}],
        "models": [{"model": "openai/gen", "api_base": fake.url}]})


def _on_cluster(cluster, work):
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def run():
        async with get_client() as client:
            return await work(client)

    with temporary_settings({PREFECT_API_URL: cluster["url"]}):
        return asyncio.run(run())


def test_a_sweep_host_whose_clock_is_behind_the_servers_still_times_out(
        cluster, fake, tmp_path, monkeypatch):
    """Whether a queue is served is whether its `last_polled` (the server's clock) moves: a
    queue polled once, then by no worker, times out however far behind this host's clock is."""
    import asyncio
    import logging
    from datetime import timezone

    from proactflow.sweeps import deployed

    _skewed(monkeypatch, -2)
    config = _one_pair(fake, tmp_path)

    async def unserved(client) -> dict:
        pool = (await deployed.find_deployment(client, config.deployment)).work_pool_name
        await deployed._ensure_queue(client, pool, "gone")
        found = await client.read_work_queue_by_name("gone", work_pool_name=pool)
        await client.update_work_queue(found.id, last_polled=datetime.now(timezone.utc))
        sent = await deployed._submit(client, config.deployment, f"skew-{uuid.uuid4()}", 0,
                                      config.runs()[0], "gone")
        return await asyncio.wait_for(deployed._wait(
            client, [sent], pool, "default", 3.0, logging.getLogger("test")), timeout=120)

    reason, = _on_cluster(cluster, unserved).values()
    assert reason.startswith("no worker took it from work queue 'gone'"), reason


def test_a_sweep_host_whose_clock_is_ahead_waits_while_workers_poll(
        cluster, fake, tmp_path, monkeypatch):
    """A run waiting in a queue that a worker keeps polling (here the queue takes no run for a
    while, as when its workers are busy) is not cancelled, whatever this host's clock says."""
    import asyncio
    import logging

    from proactflow.sweeps import deployed

    _skewed(monkeypatch, 2)
    config = _one_pair(fake, tmp_path)
    timeout = 6.0

    async def held_then_served(client) -> tuple:
        pool = (await deployed.find_deployment(client, config.deployment)).work_pool_name
        await deployed._ensure_queue(client, pool, "gpu")
        queue = await client.read_work_queue_by_name("gpu", work_pool_name=pool)
        await client.update_work_queue(queue.id, concurrency_limit=0)
        try:
            sent = await deployed._submit(client, config.deployment, f"skew-{uuid.uuid4()}", 0,
                                          config.runs()[0], "gpu")
            waiting = asyncio.ensure_future(deployed._wait(
                client, [sent], pool, "default", timeout, logging.getLogger("test")))
            await asyncio.sleep(2 * timeout)  # twice the timeout, the worker polling
            held = await client.read_flow_run(sent.run_id)
        finally:
            await client.update_work_queue(queue.id, concurrency_limit=None)
        return held, await asyncio.wait_for(waiting, timeout=120)

    held, outcome = _on_cluster(cluster, held_then_served)
    assert held.state.is_scheduled(), held.state
    assert list(outcome.values()) == [None], outcome  # taken once the queue let it go
