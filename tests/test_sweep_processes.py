"""A sweep spread over processes of this machine (issue #9, item 3): the same leaderboard as the
same sweep in one process, every call made once, the judge's limit kept across the processes,
and every pair's flow run under the sweep in Prefect."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import polars as pl
import pytest

from fake_openai import Reply
from helpers import run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, synthetic_model

pytestmark = pytest.mark.usefixtures("prefect_server")

MODELS = ("gen", "synth", "synth2", "synth3")
JUDGE_LIMIT = 2


def _sweep_file(path: Path, fake_url: str, store: Path, out: Path) -> Path:
    entries = "".join(f'\n[[models]]\nmodel = "openai/{name}"\napi_base = "{fake_url}"\n'
                      for name in MODELS)
    path.write_text(f"""
store = "{store}"
out = "{out}"
corpus = "{SAMPLE_CORPUS}"
judge_prompt = "{JUDGE_PROMPT}"
limit = 2
concurrency = 4

[[judges]]
model = "openai/judge2"
api_base = "{fake_url}"
concurrency = {JUDGE_LIMIT}
{entries}""")
    return path


def _post(api: str, path: str, body: dict) -> list[dict]:
    request = urllib.request.Request(f"{api}{path}", method="POST",
                                     headers={"Content-Type": "application/json"},
                                     data=json.dumps(body).encode())
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def _children_of_newest_sweep(api: str) -> list[dict]:
    """The flow runs whose tracking task run belongs to the newest `sweep` flow run."""
    sweeps = _post(api, "/flow_runs/filter", {
        "flows": {"name": {"any_": ["sweep"]}}, "sort": "EXPECTED_START_TIME_DESC", "limit": 1})
    tasks = _post(api, "/task_runs/filter", {
        "flow_runs": {"id": {"any_": [sweeps[0]["id"]]}}, "limit": 200})
    return _post(api, "/flow_runs/filter", {
        "flow_runs": {"parent_task_run_id": {"any_": [t["id"] for t in tasks]}}, "limit": 200})


def _own_answers(name: str):
    """Each model answers differently, so that a pair mixed up with another would show."""
    def answer(request: dict) -> Reply:
        reply = synthetic_model(request)
        return Reply(content=f"{name}: {reply.content}")
    return answer


def test_a_sweep_over_processes_ranks_as_one_process_does(fake, tmp_path, capsys,
                                                          prefect_server):
    for name in MODELS:
        fake.responders[name] = _own_answers(name)
    fake.latency = 0.05  # calls overlap, so that a shared limit is tested
    boards = {}
    for processes in (1, 2):
        fake.reset_counts()
        out = tmp_path / f"out{processes}"
        config = _sweep_file(tmp_path / f"sweep{processes}.toml", fake.url,
                             tmp_path / f"store{processes}", out)
        assert run_cli("sweep", ["--config", str(config), "--processes", str(processes)]) == 0
        assert all(fake.calls[name] == 6 for name in MODELS), fake.calls  # 2 dialogues
        asked = [json.dumps([r["model"], r["messages"]]) for r in fake.requests]
        assert fake.calls["judge2"] == 24 and len(set(asked)) == len(asked)  # each once
        assert fake.peak_by_model["judge2"] <= JUDGE_LIMIT
        boards[processes] = pl.read_csv(out / "leaderboard.csv")
        for name in MODELS:  # the sweep wrote each pair's exports from the store
            assert (out / f"openai_{name}__openai_judge2" / "metrics.json").exists()
    assert boards[2].height == 4 * boards[2]["phase"].n_unique()
    assert boards[1].equals(boards[2])
    children = _children_of_newest_sweep(prefect_server)
    assert sorted(run["name"] for run in children) == \
        sorted(f"openai/{name} judged by openai/judge2" for name in MODELS)
    assert {run["state_type"] for run in children} == {"COMPLETED"}


def test_processes_is_checked_before_any_call(fake, tmp_path, capsys):
    config = _sweep_file(tmp_path / "sweep.toml", fake.url, tmp_path / "store", tmp_path / "o")
    config.write_text(config.read_text().replace("concurrency = 4", "processes = 0"))
    assert run_cli("sweep", ["--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("processes: Input should be greater than or equal to 1, got 0"), err
    assert len(err.splitlines()) == 1 and sum(fake.calls.values()) == 0


def test_processes_count_rule():
    from proactflow.sweeps.process_groups import groups, process_count

    assert process_count(None, 16, cores=2) == 2      # one per 4 pairs, at most one per core
    assert process_count(None, 4, cores=8) == 1       # a small sweep stays in its process
    assert process_count(None, 9, cores=8) == 3
    assert process_count(5, 3, cores=1) == 3          # as asked, never more than the pairs
    assert groups(5, 2) == [[0, 2, 4], [1, 3]]


def test_processes_with_a_deployment_is_one_line(fake, tmp_path, capsys):
    config = _sweep_file(tmp_path / "sweep.toml", fake.url, tmp_path / "store", tmp_path / "o")
    config.write_text('deployment = "evaluate/evaluate"\nprocesses = 2\n' + config.read_text())
    assert run_cli("sweep", ["--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert "processes spreads a sweep over this machine; with a deployment the pool's " \
           "workers run the pairs" in err and len(err.splitlines()) == 1


def test_a_model_called_from_several_groups_has_its_concurrency_dealt(tmp_path):
    from proactflow.sweeps.process_groups import groups, with_shares
    from proactflow.sweeps.sweep_file import SweepConfig

    config = SweepConfig.model_validate({
        "store": str(tmp_path), "concurrency": 8,
        "judges": [{"model": "openai/judge", "api_base": "http://127.0.0.1:9/v1",
                    "concurrency": 5}],
        "models": [{"model": f"openai/m{i}", "api_base": "http://127.0.0.1:9/v1"}
                   for i in range(3)]})
    runs = with_shares(config.runs(), groups(3, 2))   # groups [0, 2] and [1]
    judge = [r.runtime.limits(r.judge).share for r in runs if r.judge is not None]
    assert judge == [3, 2, 3]                           # 5 dealt between two groups
    assert all(r.runtime.limits(r.judge).concurrency == 5 for r in runs if r.judge)
    # A model under test lives in one group: its whole limit, nothing dealt.
    assert {r.runtime.limits(r.model_under_test).share for r in runs} == {None}
