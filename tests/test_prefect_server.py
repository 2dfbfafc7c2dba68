"""Against a real Prefect server (`prefect server start` on loopback), as in production: the run
appears named and tagged, with its score table and a link to its exports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from helpers import cli_args
import prefect_database
import warm_spawn
from ports import free_port


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    home = prefect_database.seeded_home(tmp_path_factory.mktemp("prefect-server-home"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host",
                               "127.0.0.1", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                break
        except OSError:
            assert server.poll() is None, "prefect server start exited"
            assert time.monotonic() < deadline, "prefect server did not come up in 120 s"
            time.sleep(0.5)
    yield url, env
    server.terminate()
    server.wait(timeout=30)


def post(url: str, path: str, body: dict) -> list[dict]:
    request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_run_against_a_real_server_shows_in_its_api(real_server, fake, tmp_path):
    url, env = real_server
    out = tmp_path / "out"
    args = cli_args(fake, tmp_path / "store", judge_model="openai/judge2",
                    extra=("--limit", "2", "--out", str(out)))
    done = warm_spawn.run([sys.executable, "-m", "proactflow.cli", "run", *args],
                          env=dict(env, PREFECT_API_URL=url), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = post(url, "/flow_runs/filter", {"flow_runs": {"name": {
        "any_": ["openai/gen judged by openai/judge2"]}}, "limit": 5, "offset": 0,
        "sort": "START_TIME_DESC"})
    assert len(runs) == 1 and runs[0]["state"]["type"] == "COMPLETED"
    assert {"proactbench", "model:openai/gen", "judge:openai/judge2"} <= set(runs[0]["tags"])
    artifacts = post(url, "/artifacts/filter", {"artifacts": {"flow_run_id": {
        "any_": [runs[0]["id"]]}}, "limit": 10, "offset": 0, "sort": "CREATED_DESC"})
    by_type = {a["type"]: a for a in artifacts}
    table = by_type["table"]["data"]
    rows = json.loads(table) if isinstance(table, str) else table
    assert [r["phase"] for r in rows][-1] == "OVERALL" and rows[-1]["triggers"] == 6
    # Prefect stores a link artifact as markdown: [text](url).
    assert by_type["markdown"]["key"] == "outputs-openai-gen-by-openai-judge2"
    assert by_type["markdown"]["data"] == f"[metrics.json]({(out / 'metrics.json').as_uri()})"
    for _ in range(150):  # task runs reach the server as events, stored a moment later
        tasks = post(url, "/task_runs/filter", {"flow_runs": {"id": {"any_": [runs[0]["id"]]}},
                                                "limit": 10, "offset": 0,
                                                "sort": "EXPECTED_START_TIME_ASC"})
        if len(tasks) >= 4:
            break
        time.sleep(0.2)
    assert sorted(t["name"].rsplit("-", 1)[0] for t in tasks) == \
        ["judgments", "phase_scores", "responses", "triggers"]


def _stored(store) -> dict[str, object]:
    """Every artifact of a store by its path (stage/key), with its table."""
    import polars as pl

    tables: dict[str, object] = {}
    for path in sorted((store / "artifacts").rglob("*")):
        if path.is_file() and path.suffix == ".parquet":
            # Rows in the order their calls finished; latency_s is each call's own.
            table = pl.read_parquet(path)
            table = table.drop([c for c in table.columns if c == "latency_s"])
            tables[str(path.relative_to(store / "artifacts"))] = table.sort(table.columns)
        elif path.is_file():
            tables[str(path.relative_to(store / "artifacts"))] = path.read_bytes()
    return tables


def _record(store, flow: str) -> dict:
    """The run record of the store's `flow` run, without what differs from run to run."""
    [path] = [p for p in (store / "runs").glob("*.json")
              if json.loads(p.read_text())["flow"] == flow]
    record = json.loads(path.read_text())
    for volatile in ("run_id", "started", "finished", "seconds"):
        record.pop(volatile)
    for stage in record["stages"]:
        stage.pop("seconds")
    record["settings"].pop("store")
    record["settings"].pop("out")
    record["outputs"] = sorted(record["outputs"])
    return record


def test_a_run_without_prefect_stores_what_a_tracked_run_stores(real_server, fake, tmp_path):
    """Without PREFECT_API_URL a run (and a re-judging) reports to no server and does not even
    import Prefect; with it, to the real server: the same artifacts under the same keys, the
    same tables, the same run records and exports."""
    import polars as pl

    url, env = real_server
    plain_env = dict(env, PREFECT_HOME=str(tmp_path / "no-prefect-home"))
    stores, outs = {}, {}
    for name, run_env in (("untracked", plain_env), ("tracked", dict(env, PREFECT_API_URL=url))):
        stores[name], outs[name] = tmp_path / name / "store", tmp_path / name / "out"
        for command, judge in (("run", "openai/judge"), ("rejudge", "openai/judge2")):
            args = cli_args(fake, stores[name], judge_model=judge,
                            extra=("--limit", "2", "--out", str(outs[name] / command)))
            # The untracked command starts cold, its imports listed (-X importtime); the
            # tracked one is forked warm (warm_spawn.py): Prefect's task-run lines show it ran.
            options = ("-X", "importtime") if name == "untracked" else ()
            done = warm_spawn.run([sys.executable, *options, "-m", "proactflow.cli", command,
                                   *args], env=run_env, capture_output=True, text=True,
                                  timeout=300, cwd=tmp_path)
            assert done.returncode == 0, done.stderr[-2000:]
            imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                        if line.startswith("import time:")}
            log = "\n".join(line for line in done.stderr.splitlines()
                            if not line.startswith("import time:"))
            if name == "untracked":
                assert imported, "the untracked command did not list its imports"
                assert "prefect" not in imported, "a run without a Prefect API imported it"
                assert f"proactflow.{'judgments'} - judgments by {judge}" in log, log
                assert "Flow run" not in log and "Task run" not in log, log
            else:
                assert "Task run 'judgments" in log, log
    untracked, tracked = _stored(stores["untracked"]), _stored(stores["tracked"])
    assert untracked.keys() == tracked.keys() and untracked
    for path, table in untracked.items():
        if isinstance(table, pl.DataFrame):
            assert table.equals(tracked[path]), path
        else:
            assert table == tracked[path], path
    for flow in ("evaluate", "rejudge"):
        assert _record(stores["untracked"], flow) == _record(stores["tracked"], flow)
    for command in ("run", "rejudge"):
        exports = sorted(p.name for p in (outs["untracked"] / command).iterdir())
        assert exports == sorted(p.name for p in (outs["tracked"] / command).iterdir())
        assert (outs["untracked"] / command / "metrics.json").read_text() == \
            (outs["tracked"] / command / "metrics.json").read_text()
    runs = post(url, "/flow_runs/filter", {"flow_runs": {"name": {
        "any_": ["openai/gen judged by openai/judge2"]}}, "limit": 5, "offset": 0,
        "sort": "START_TIME_DESC"})
    assert [run["flow_id"] for run in runs]  # the tracked re-judging, reported
