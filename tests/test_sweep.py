"""A sweep with one failing model: the others finish and the summary says what failed."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import polars as pl
import pytest

from fake_openai import Reply
from helpers import run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS

pytestmark = pytest.mark.usefixtures("prefect_server")


def _sweep_file(tmp_path, fake, limit: int, models: dict[str, str]) -> Path:
    """A sweep of the sample corpus's first `limit` dialogues, judged by openai/judge2 on the
    fake, into tmp_path's store and its nightly folder; `models`: each model's name on the
    fake, and the further lines of its [[models]] table."""
    tables = "".join(f'\n[[models]]\nmodel = "openai/{name}"\napi_base = "{fake.url}"\n{extra}'
                     for name, extra in models.items())
    config = tmp_path / "sweep.toml"
    config.write_text(f"""
store = "{tmp_path / 'store'}"
out = "{tmp_path / 'nightly'}"
corpus = "{SAMPLE_CORPUS}"
judge_prompt = "{JUDGE_PROMPT}"
limit = {limit}

[[judges]]
model = "openai/judge2"
api_base = "{fake.url}"
{tables}""")
    return config


def test_sweep_survives_a_failing_model(fake, tmp_path, capsys, prefect_server):
    fake.responders["locked"] = lambda request: Reply(status=401, content="invalid key")
    out = tmp_path / "nightly"
    config = _sweep_file(tmp_path, fake, 2, {"gen": "", "locked": "",
                                             "synth": "temperature = 0.1\n"})
    assert run_cli("sweep", ["--config", str(config)]) == 1
    printed = capsys.readouterr().out
    assert "FAILED  openai/locked judged by openai/judge2: openai/locked: the provider " \
           "rejected the credentials" in printed
    assert "ok      openai/gen judged by openai/judge2" in printed
    board = pl.read_csv(out / "leaderboard.csv")
    assert sorted(board["model"].unique().to_list()) == ["openai/gen", "openai/synth"]
    assert (out / "openai_gen__openai_judge2" / "metrics.json").exists()
    summary = (out / "sweep.md").read_text()
    assert "openai/locked" in summary and "## Tokens and cost" in summary
    assert "openai/gen" in (out / "report.html").read_text()
    assert fake.calls["gen"] == 6 and fake.calls["synth"] == 6  # the first 2 dialogues
    request = urllib.request.Request(
        f"{prefect_server}/artifacts/filter", method="POST",
        headers={"Content-Type": "application/json"},
        data=json.dumps({"artifacts": {"key": {"any_": ["sweep-leaderboard"]}}, "limit": 1,
                         "offset": 0, "sort": "CREATED_DESC"}).encode())
    with urllib.request.urlopen(request) as response:
        markdown = json.loads(response.read())[0]["data"]
    assert "| openai/gen | openai/judge2 |" in markdown and "openai/locked" in markdown


def test_sweep_file_errors_are_one_line(tmp_path, capsys):
    config = tmp_path / "sweep.toml"
    config.write_text('[[models]]\nmodel = "gpt-4o-mini"\ncolour = "blue"\n')
    assert run_cli("sweep", ["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"proactflow: error: {config}: judges: Field required") or \
        err == f"proactflow: error: {config}: models[1] (gpt-4o-mini): colour: unknown key\n"
    assert err.count("\n") == 1


def test_each_sweep_in_a_process_asks_its_endpoints_anew(fake, tmp_path, capsys):
    """A process that runs one sweep after another (a caller of cli.main) reads the endpoint's
    /models again each time: a model the server did not list, listed now, is swept."""
    config = _sweep_file(tmp_path, fake, 1, {"gen": ""})
    fake.listed = ["judge2"]  # gen not served yet
    assert run_cli("sweep", ["--config", str(config)]) == 1  # the pair is skipped, said why
    assert "does not list 'gen'" in capsys.readouterr().out and not fake.calls["gen"]
    fake.listed = None  # now it is
    assert run_cli("sweep", ["--config", str(config)]) == 0, capsys.readouterr()
    assert fake.calls["gen"]
