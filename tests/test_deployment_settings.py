"""What a sweep with a deployment sends its workers and refuses, without a server: settings
without secrets or relative paths, one-line errors for misplaced work queues, credentials in
an endpoint URL, and no Prefect server to reach."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS
import warm_spawn


def test_what_workers_get_holds_no_secret_and_no_local_folder(tmp_path, monkeypatch):
    from proactflow.sweeps.deployed import worker_parameters
    from proactflow.sweeps.sweep_file import SweepConfig

    monkeypatch.chdir(tmp_path)
    config = SweepConfig.model_validate({
        "deployment": "evaluate/evaluate", "store": "store", "out": "out",
        "database": "postgresql://proactflow@db.lan:5432/proactflow",
        "corpus": "dialogues.jsonl", "judges": [{"model": "gpt-5.4"}],
        "models": [{"model": "openai/m", "api_base": "http://gpu1.lan:8000/v1",
                    "work_queue": "gpu1"}, {"model": "gpt-4o-mini"}]})
    settings = config.runs()[0]
    assert settings.store == str(tmp_path / "store")  # a worker resolves nothing in its folder
    assert settings.corpus.path == str(tmp_path / "dialogues.jsonl")
    sent = worker_parameters(settings)["settings"]
    assert sent["database"] == "postgresql://proactflow@db.lan:5432/proactflow"
    assert sent["out"] is None and settings.out == str(tmp_path / "out" / "openai_m__gpt-5.4")
    assert config.work_queues() == ["gpu1", None]


@pytest.mark.parametrize("text, message", [
    ('[[judges]]\nmodel = "j"\n[[models]]\nmodel = "m"\nwork_queue = "gpu"\n',
     "(file): work_queue needs deployment"),
    ('deployment = "evaluate/evaluate"\n[[judges]]\nmodel = "j"\nwork_queue = "gpu"\n'
     '[[models]]\nmodel = "m"\n', "(file): work_queue belongs to [[models]]"),
    ('deployment = "evaluate/evaluate"\n[[judges]]\nmodel = "j"\n[[models]]\n'
     'model = "openai/m"\napi_base = "http://user:pw@gpu1.lan/v1"\n',
     "(file): openai/m: with a deployment, credentials go in the workers'"),
])
def test_deployment_settings_errors_are_one_line(tmp_path, capsys, text, message,
                                                 prefect_server):
    config = tmp_path / "sweep.toml"
    config.write_text(text)
    assert run_cli("sweep", ["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"proactflow: error: {config}: {message}"), err
    assert err.count("\n") == 1 and "pw" not in err


def test_a_deployment_without_a_prefect_server_is_one_line(tmp_path):
    config = tmp_path / "sweep.toml"
    config.write_text('deployment = "evaluate/evaluate"\n[[judges]]\nmodel = "j"\n'
                      '[[models]]\nmodel = "m"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    done = warm_spawn.run([sys.executable, "-m", "proactflow.cli", "sweep", "--config",
                           str(config)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr == (
        "proactflow: error: deployment evaluate/evaluate needs the Prefect server its workers "
        "use: set PREFECT_API_URL (e.g. http://prefect.lan:4200/api)\n")


def test_a_prefect_server_out_of_reach_is_one_line(tmp_path):
    from ports import reserved_port

    config = tmp_path / "sweep.toml"
    config.write_text(f'deployment = "evaluate/evaluate"\ncorpus = "{SAMPLE_CORPUS}"\n'
                      f'judge_prompt = "{JUDGE_PROMPT}"\nstore = "{tmp_path / "store"}"\n'
                      '[[judges]]\nmodel = "openai/j"\n[[models]]\nmodel = "openai/m"\n')
    with reserved_port() as port:
        url = f"http://127.0.0.1:{port}/api"
        env = dict(os.environ, PREFECT_API_URL=url)
        done = warm_spawn.run([sys.executable, "-m", "proactflow.cli", "sweep", "--config",
                               str(config)], env=env, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode == 2 and done.stderr == (
        f"proactflow: error: cannot reach the Prefect server at {url} (All connection attempts "
        "failed): start it ('prefect server start') or correct PREFECT_API_URL\n")


def test_a_worker_gets_the_database_url_with_its_user_name(tmp_path, monkeypatch):
    """The user name is no secret (issue #20, item 9): a worker without PROACTFLOW_DATABASE
    connects with the URL its parameters hold; a password is still refused there."""
    from proactflow.config.settings import RunSettings
    from proactflow.sweeps.deployed import worker_parameters
    from proactflow.sweeps.sweep_file import SweepConfig

    monkeypatch.delenv("PROACTFLOW_DATABASE", raising=False)
    url = "postgresql://proactflow@db.lan:5432/proactflow"
    config = SweepConfig.model_validate({
        "deployment": "evaluate/evaluate", "store": str(tmp_path), "database": url,
        "judges": [{"model": "gpt-5.4"}], "models": [{"model": "gpt-4o-mini"}]})
    sent = worker_parameters(config.runs()[0])["settings"]
    assert RunSettings.model_validate(sent).database == url  # what the worker's run uses
    with pytest.raises(Exception, match="must not hold a password"):  # nor an SSL key's
        RunSettings.model_validate({**sent, "database": url + "?sslpassword=pw"})
    with pytest.raises(Exception, match="must not hold a password: give it in PGPASSWORD"):
        RunSettings.model_validate({**sent, "database": url.replace("proactflow@",
                                                                    "proactflow:pw@")})


def test_a_worker_points_its_runs_at_another_database_only_with_its_own_variable(monkeypatch):
    """A deployment's run connects where its parameters say; a worker's PROACTFLOW_DATABASE
    is needed only to send its runs elsewhere. Outside a deployment the variable changes
    nothing that the run's settings name (a sweep's child processes, a local run)."""
    from proactflow.config.settings import RunSettings
    from proactflow.flows.evaluate import on_this_machine

    sent = RunSettings(model_under_test={"model": "m"}, judge={"model": "j"},
                       database="postgresql://proactflow@db.lan:5432/proactflow")
    replica = "postgresql://proactflow@replica.lan:5432/proactflow"
    monkeypatch.delenv("PROACTFLOW_DATABASE", raising=False)
    monkeypatch.setenv("PREFECT__RUNTIME__DEPLOYMENT__ID", "a-deployment")
    assert on_this_machine(sent).database == sent.database  # the parameters' URL
    monkeypatch.setenv("PROACTFLOW_DATABASE", replica)
    assert on_this_machine(sent).database == replica
    monkeypatch.delenv("PREFECT__RUNTIME__DEPLOYMENT__ID")
    assert on_this_machine(sent).database == sent.database  # not a deployment's run
