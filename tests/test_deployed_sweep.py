"""A sweep whose evaluations run on Prefect workers, as across machines: a real `prefect server
start` (on the test PostgreSQL when there is one), the repository's prefect.yaml deployed with
`prefect deploy --name evaluate`, two `prefect worker start` processes, each with a folder and
state of its own, the store on S3 (SeaweedFS) and the calls in PostgreSQL when those servers can
start here (else a local folder and the store's own cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from fake_openai import Reply
from prefect_cluster import answers, evaluate_runs, optional, prefect, wait_until, worker_of
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, synthetic_model
from test_prefect_server import free_port, post

POOL = "proactflow"  # prefect.yaml's
MODELS = ("gen", "synth", "synth2", "synth3")
GPU_MODELS = ("gen", "synth")  # in work queue "gpu", served by worker "w-gpu" only


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    """The server, the pool, the deployment and two workers; yields what a sweep needs."""
    root = tmp_path_factory.mktemp("cluster")
    postgres, seaweed = optional(request, "postgres_server"), optional(request, "seaweed")
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PREFECT_", "AWS_", "PROACTFLOW_"))}
    base.update(PREFECT_SERVER_ANALYTICS_ENABLED="false")
    server_env = dict(base, PREFECT_HOME=str(root / "server-home"))
    database = None
    if postgres is not None:
        # One PostgreSQL for both: the Prefect server's database and the sweep's calls.
        server_env["PREFECT_API_DATABASE_CONNECTION_URL"] = postgres.create_database().replace(
            "postgresql://", "postgresql+asyncpg://", 1)
        database = postgres.create_database()
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
         str(port)], env=server_env, stdout=subprocess.DEVNULL,
        stderr=open(root / "server.log", "w"))
    processes = [server]
    try:
        wait_until(lambda: answers(url), "prefect server start", server)
        client_env = dict(base, PREFECT_API_URL=url, PREFECT_HOME=str(root / "client-home"))
        prefect(client_env, "work-pool", "create", POOL, "--type", "process")
        prefect(client_env, "deploy", "--name", "evaluate")
        shared = dict(client_env, **(seaweed.environment() if seaweed else {}),
                      **({"PROACTFLOW_DATABASE": database} if database else {}))
        folders = {}
        for name, queue in (("w-gpu", "gpu"), ("w-cpu", "default")):
            folder = folders[name] = root / name
            (folder / "cwd").mkdir(parents=True)
            env = dict(shared, PREFECT_HOME=str(folder / "home"), PREFECT_WORKER_QUERY_SECONDS="2",
                       PROACTFLOW_STATE_DIR=str(folder / "state"))
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL, "--limit", "4",
                 "--name", name, "--work-queue", queue], cwd=folder / "cwd", env=env,
                stdout=open(folder / "worker.log", "w"), stderr=subprocess.STDOUT))

        def online() -> bool:
            workers = post(url, f"/work_pools/{POOL}/workers/filter", {})
            return {w["name"] for w in workers if w["status"] == "ONLINE"} >= set(folders)

        wait_until(online, "two workers")
        if postgres is not None:  # the server's history went to PostgreSQL, not SQLite
            assert not list((root / "server-home").rglob("*.db"))
        yield {"url": url, "env": client_env, "store_env": seaweed.environment() if seaweed else {},
               "seaweed": seaweed, "database": database, "folders": folders, "root": root}
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def sweep_file(path: Path, fake, cluster, store: str, models, *, extra: str = "",
               queue_of=lambda model: "gpu" if model in GPU_MODELS else None) -> Path:
    database = f'database = "{cluster["database"]}"\n' if cluster["database"] else ""
    entries = "".join(
        f'\n[[models]]\nmodel = "openai/{m}"\napi_base = "{fake.url}"\n'
        + (f'work_queue = "{queue_of(m)}"\n' if queue_of(m) else "") for m in models)
    path.write_text(f"""store = "{store}"
{database}out = "{path.parent / 'out'}"
corpus = "{SAMPLE_CORPUS}"
judge_prompt = "{JUDGE_PROMPT}"
limit = 2
deployment = "evaluate/evaluate"
{extra}
[[judges]]
model = "openai/judge2"
api_base = "{fake.url}"
{entries}""")
    return path


def sweep(cluster, config: Path, cwd: Path) -> subprocess.CompletedProcess:
    cwd.mkdir(exist_ok=True)
    env = dict(cluster["env"], **cluster["store_env"], PREFECT_HOME=str(cwd / "home"))
    return subprocess.run([sys.executable, "-m", "proactflow.cli", "sweep", "--config",
                           str(config)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def local_leftovers(*folders: Path) -> list[Path]:
    """What a store writes (artifacts, run records, a default store folder, a call cache)
    found under local folders."""
    return [path for folder in folders for path in folder.rglob("*")
            if path.suffix == ".parquet" or path.parent.name == "runs"
            or path.name in (".proactflow", "calls")]


def test_a_sweep_on_two_workers(cluster, fake, tmp_path):
    for name in ("synth2", "synth3"):
        fake.responders[name] = synthetic_model
    # On S3 the call cache is PostgreSQL's (or each machine's own, which is not exact across
    # workers): S3 only with a database.
    seaweed = cluster["seaweed"] if cluster["database"] else None
    store = f"s3://{seaweed.bucket}/sweep-{uuid.uuid4().hex[:8]}" if seaweed \
        else str(tmp_path / "store")
    config = sweep_file(tmp_path / "sweep.toml", fake, cluster, store, MODELS)
    clock = time.monotonic()
    done = sweep(cluster, config, tmp_path / "cwd")
    seconds = time.monotonic() - clock
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for model in MODELS:
        assert f"ok      openai/{model} judged by openai/judge2" in done.stdout
    # Every call once: 6 triggers of the first 2 dialogues per model; the three synthetic
    # models answer alike, so the judge is asked 6 + 6 different things, each once, whichever
    # worker asks first.
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
    if cluster["database"]:  # redacted: each worker's PROACTFLOW_DATABASE supplies it
        assert cluster["database"] not in sent and "postgresql://***@" in sent
    assert len({r["infrastructure_pid"] for r in runs}) == len(MODELS)
    waited = [datetime.fromisoformat(r["start_time"]) -
              datetime.fromisoformat(r["expected_start_time"]) for r in runs]
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
    assert "openai/synth3" in (out / "report.html").read_text()
    if seaweed:
        # The workers' folders and state, the sweep's folder: no artifact, record or store.
        assert not local_leftovers(cluster["root"], tmp_path / "cwd")

    fake.reset_counts()
    clock = time.monotonic()
    again = sweep(cluster, config, tmp_path / "cwd")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert sum(fake.calls.values()) == 0
    print(f"the same sweep again: {time.monotonic() - clock:.1f} s, no call")


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

    from proactflow.deployed import _submit
    from proactflow.sweeps import SweepConfig

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
    """What README says to do with a run whose worker's machine vanished."""
    config = sweep_file(tmp_path / "sweep.toml", fake, cluster, str(tmp_path / "store"),
                        ("gen",), queue_of=lambda model: "vanished")
    (tmp_path / "cwd").mkdir()
    env = dict(cluster["env"], PREFECT_HOME=str(tmp_path / "cwd" / "home"))
    running = subprocess.Popen([sys.executable, "-m", "proactflow.cli", "sweep", "--config",
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
