"""Strict input (issue #36): a sweep file's booleans and numbers are what they say (a string is
not a boolean), every numeric option is range-checked with the other option checks, and a
sweep file's database is checked before any pair starts. Each mistake is one line, exit 2,
before any request reaches the endpoint."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import pytest

from helpers import cli_args, run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS
import warm_spawn

MODEL = '[[models]]\nmodel = "openai/gen"\n'


@pytest.mark.parametrize("text, problem", [
    ('batch = "yes"\n' + MODEL, 'batch: expected true, false or "auto", got \'yes\''),
    ("refresh_on_change = 1\n" + MODEL, "refresh_on_change: expected true or false, got 1"),
    (MODEL + "batch = 1\n", 'models[1] (openai/gen): batch: expected true, false or "auto", '
                            "got 1"),
    (MODEL + 'gemini_safety_off = "true"\n',
     "models[1] (openai/gen): gemini_safety_off: expected true or false, got 'true'"),
    (MODEL + 'temperature = "0.5"\n',
     "models[1] (openai/gen): temperature: expected a number, got '0.5'"),
    (MODEL + "temperature = 2.5\n",
     "models[1] (openai/gen): temperature: Input should be less than or equal to 2, got 2.5"),
    (MODEL + "top_p = 0\n", "models[1] (openai/gen): top_p: Input should be greater than 0, "
                            "got 0"),
    (MODEL + "max_tokens = 0\n", "models[1] (openai/gen): max_tokens: Input should be greater "
                                 "than or equal to 1, got 0"),
    ("limit = 2.0\n" + MODEL, "limit: expected a whole number, got 2.0"),
    ("samples = true\n" + MODEL, "samples: expected a whole number, got true"),
    ("batch_poll = inf\n" + MODEL, "batch_poll: expected a finite number, got inf"),
    ("[options]\nhint = 1\n" + MODEL, "options.hint: expected a string or true or false, got 1"),
])
def test_a_sweep_file_value_of_the_wrong_kind_is_one_line(tmp_path, capsys, text, problem,
                                                         prefect_server):
    config = tmp_path / "sweep.toml"
    config.write_text(text)
    assert run_cli("sweep", ["--config", str(config)]) == 2
    assert capsys.readouterr().err == f"proactflow: error: {config}: {problem}\n"


def test_a_strict_sweep_file_still_takes_what_toml_writes():
    from proactflow.sweeps.sweep_file import SweepConfig

    config = SweepConfig.model_validate({
        "batch": "auto", "refresh_on_change": True, "regression_threshold": 0, "rpm": 60,
        "judges": [{"model": "openai/judge", "temperature": 0, "top_p": "none"}],
        "models": [{"model": "openai/gen", "temperature": 1, "top_p": 1, "batch": False}]})
    assert config.batch == "auto" and config.models[0].temperature == 1.0
    assert config.judges[0].top_p is None and config.models[0].batch is False


@pytest.mark.parametrize("option, value, problem", [
    ("--eval-top-p", "3", "expected a top_p above 0 and at most 1, or 'none', got '3'"),
    ("--judge-top-p", "0", "expected a top_p above 0 and at most 1, or 'none', got '0'"),
    ("--eval-temperature", "-0.1", "expected a temperature from 0 to 2, or 'none', got '-0.1'"),
    ("--judge-temperature", "2.5", "expected a temperature from 0 to 2, or 'none', got '2.5'"),
    ("--eval-max-tokens", "0", "expected a whole number from 1 to 1000000, got 0"),
    ("--judge-attempts", "11", "expected a whole number from 1 to 10, got 11"),
    ("--samples", "101", "expected a whole number from 1 to 100, got 101"),
    ("--concurrency", "5000", "expected a whole number from 1 to 1024, got 5000"),
    ("--max-attempts", "0", "expected a whole number from 1 to 100, got 0"),
    ("--retry-delay", "61", "expected a number from 0 to 60, got '61'"),
    ("--rpm", "nan", "expected a number above 0, got 'nan'"),
    ("--min-coverage", "1.5", "expected a fraction from 0 to 1, got '1.5'"),
])
def test_a_number_out_of_range_is_one_line_before_any_call(fake, tmp_path, capsys, option,
                                                           value, problem):
    args = cli_args(fake, tmp_path / "store", extra=(option, value))
    with pytest.raises(SystemExit) as stopped:
        run_cli("run", args)
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (f"proactflow run: error: argument {option}: {problem} "
                                       "(see 'proactflow run --help')\n")
    assert not fake.requests


@pytest.mark.parametrize("command, option, value", [
    ("report", "--seed", "-1"), ("report", "--bootstrap", "0"), ("sweep", "--processes", "999")])
def test_the_other_commands_numbers_are_range_checked_too(tmp_path, capsys, command, option,
                                                          value):
    required = {"report": ["--out", str(tmp_path)], "sweep": ["--config", "x.toml"]}[command]
    with pytest.raises(SystemExit) as stopped:
        run_cli(command, [*required, option, value])
    assert stopped.value.code == 2
    assert f"argument {option}: expected a whole number from" in capsys.readouterr().err


def test_the_ranges_are_in_the_help(capsys):
    with pytest.raises(SystemExit):
        run_cli("run", ["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for said in ("sampling temperature from 0 to 2", "top_p, above 0 and at most 1",
                 "1 to 10 (default: 4", "1 to 1024 (default: 16)", "first backoff delay, 0 to 60"):
        assert said in help_text


def _database_sweep(tmp_path, fake, database: str):
    config = tmp_path / "sweep.toml"
    config.write_text(f"""
store = "{tmp_path / 'store'}"
database = "{database}"
corpus = "{SAMPLE_CORPUS}"
judge_prompt = "{JUDGE_PROMPT}"
processes = 2

[[judges]]
model = "openai/judge"
api_base = "{fake.url}"

[[models]]
model = "openai/gen"
api_base = "{fake.url}"

[[models]]
model = "openai/synth"
api_base = "{fake.url}"
""")
    return config


def _sweep(config, prefect_server: str, **env: str) -> subprocess.CompletedProcess[str]:
    return warm_spawn.run([sys.executable, "-m", "proactflow.cli", "sweep", "--config",
                           str(config)], env={**os.environ, "PREFECT_API_URL": prefect_server,
                                              **env},
                          capture_output=True, text=True, timeout=300)


def test_a_sweep_files_closed_database_port_is_one_line_before_any_pair(fake, tmp_path,
                                                                         prefect_server):
    from ports import reserved_port

    with reserved_port() as port:
        done = _sweep(_database_sweep(tmp_path, fake,
                                      f"postgresql://someone@127.0.0.1:{port}/p"), prefect_server)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr == (f"proactflow: error: database 127.0.0.1:{port}/p refused the "
                           "connection: is PostgreSQL running there, on that port?\n")
    assert not fake.requests


def test_a_sweep_files_database_with_a_wrong_password_is_one_line(fake, tmp_path,
                                                                  prefect_server,
                                                                  postgres_server):
    role = f"pw_{uuid.uuid4().hex[:8]}"
    url = postgres_server.create_database(owner=role)
    postgres_server.require_password(role, "right-one")

    async def works() -> None:  # the right password is let in: the check is not the server's
        import asyncpg

        await (await asyncpg.connect(url, password="right-one")).close()

    asyncio.run(works())
    done = _sweep(_database_sweep(tmp_path, fake, url), prefect_server,
                  PGPASSWORD="wrong-one")
    assert done.returncode == 2, done.stderr[-3000:]
    [line] = done.stderr.splitlines()
    assert line.startswith(f"proactflow: error: database 127.0.0.1:{postgres_server.port}/"), line
    assert "password authentication failed" in line and "PGPASSWORD" in line, line
    assert role not in line and "wrong-one" not in line, line
    assert not fake.requests
