"""Against a real Prefect server (`prefect server start` on loopback), as in production: the run
appears named and tagged, with its score table and a link to its exports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from helpers import cli_args


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def real_server(tmp_path_factory):
    home = tmp_path_factory.mktemp("prefect-server-home")
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
    done = subprocess.run([sys.executable, "-m", "proactflow.cli", "run", *args],
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
    tasks = post(url, "/task_runs/filter", {"flow_runs": {"id": {"any_": [runs[0]["id"]]}},
                                            "limit": 10, "offset": 0,
                                            "sort": "EXPECTED_START_TIME_ASC"})
    assert sorted(t["name"].rsplit("-", 1)[0] for t in tasks) == \
        ["judgments", "phase_scores", "responses", "triggers"]
