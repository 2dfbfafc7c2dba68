"""Driving a Prefect server and its workers from tests and benchmarks: a local cluster (a real
`prefect server start`, the repository's deployment, two `prefect worker start` processes), the
CLI as a subprocess, waiting for what starts (skipped with the reason where it cannot, failed
under CI=true), the API read over HTTP, sweep files for it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

import prefect_database
from replay import JUDGE_PROMPT, SAMPLE_CORPUS
from ports import free_port
from test_prefect_server import post
import warm_spawn

ROOT = Path(__file__).resolve().parent.parent
# A bound on "cannot start here", not a timing: a full run at load 10 (both test workers and
# their servers starting beside it) found `prefect server start` not yet answering after 120 s.
START_SECONDS = 300
POOL = "proactflow"  # prefect.yaml's
GPU_MODELS = ("gen", "synth")  # in work queue "gpu", served by worker "w-gpu" only


def optional(request, fixture: str):
    """A session fixture's value, or None where it skipped (under CI=true it fails instead)."""
    try:
        return request.getfixturevalue(fixture)
    except pytest.skip.Exception as exc:
        print(f"without {fixture}: {exc}")
        return None


def prefect(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def wait_until(ready, what: str, process: subprocess.Popen | None = None, *,
               skip: bool = True) -> None:
    """Wait for a server or workers to start; where they cannot, the test is skipped with the
    reason (failed under CI=true, where they must, or when not `skip`)."""
    deadline = time.monotonic() + START_SECONDS
    while not ready():
        reason = None
        if process is not None and process.poll() is not None:
            reason = f"{what}: the process exited"
        elif time.monotonic() > deadline:
            reason = f"{what}: not ready in {START_SECONDS} s"
        if reason is not None:
            if not skip or os.environ.get("CI", "").lower() == "true":
                pytest.fail(reason)
            pytest.skip(reason)
        time.sleep(0.5)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2):
            return True
    except OSError:
        return False


def evaluate_runs(url: str) -> list[dict]:
    return post(url, "/flow_runs/filter", {"deployments": {"name": {"any_": ["evaluate"]}},
                                           "limit": 200, "offset": 0, "sort": "NAME_ASC"})


def worker_of(url: str, run: dict) -> str:
    """The worker that ran a flow run, from the line it logs to the run when it takes it."""
    logs = post(url, "/logs/filter", {"logs": {"flow_run_id": {"any_": [run["id"]]}},
                                      "limit": 200, "offset": 0, "sort": "TIMESTAMP_ASC"})
    found = {m[1] for log in logs
             if (m := re.match(r"Worker '([^']+)' submitting flow run", log["message"]))}
    assert len(found) == 1, (run["name"], found)
    return found.pop()


@contextmanager
def local_cluster(root: Path, postgres=None, seaweed=None) -> Iterator[dict]:
    """The server (on `postgres` when given, which also holds the sweep's calls), the pool, the
    deployment and two workers, "w-gpu" on work queue "gpu" and "w-cpu" on "default", each with
    a folder and state of its own; yields what a sweep needs."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PREFECT_", "AWS_", "PROACTFLOW_"))}
    base.update(PREFECT_SERVER_ANALYTICS_ENABLED="false")
    server_env = dict(base, PREFECT_HOME=str(root / "server-home"))
    database = None
    if postgres is None:  # the server's own SQLite database, already migrated
        prefect_database.seeded_home(root / "server-home")
    else:
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
        # Deployed while the workers start: both are a process importing Prefect (the deploy
        # also the flow's module), which need not wait for each other; a worker polls the pool,
        # which exists, and finds the deployment's runs once there are any.
        prefect(client_env, "deploy", "--name", "evaluate")

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
               queue_of=lambda model: "gpu" if model in GPU_MODELS else None,
               judge: str = "judge2", judge_extra: str = "", corpus: Path = SAMPLE_CORPUS,
               limit: int | None = 2) -> Path:
    database = f'database = "{cluster["database"]}"\n' if cluster["database"] else ""
    entries = "".join(
        f'\n[[models]]\nmodel = "openai/{m}"\napi_base = "{fake.url}"\n'
        + (f'work_queue = "{queue_of(m)}"\n' if queue_of(m) else "") for m in models)
    path.write_text(f"""store = "{store}"
{database}out = "{path.parent / 'out'}"
corpus = "{corpus}"
judge_prompt = "{JUDGE_PROMPT}"
{f"limit = {limit}" if limit else ""}
deployment = "evaluate/evaluate"
{extra}
[[judges]]
model = "openai/{judge}"
api_base = "{fake.url}"
{judge_extra}
{entries}""")
    return path


def sweep(cluster, config: Path, cwd: Path, timeout: float = 300
          ) -> subprocess.CompletedProcess:
    cwd.mkdir(exist_ok=True)
    env = dict(cluster["env"], **cluster["store_env"], PREFECT_HOME=str(cwd / "home"))
    return warm_spawn.run([sys.executable, "-m", "proactflow.cli", "sweep", "--config",
                           str(config)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def local_leftovers(*folders: Path) -> list[Path]:
    """What a store writes (artifacts, run records, a default store folder, a call cache)
    found under local folders."""
    return [path for folder in folders for path in folder.rglob("*")
            if path.suffix == ".parquet" or path.parent.name == "runs"
            or path.name in (".proactflow", "calls")]
