"""A sweep's child processes call the endpoint URLs the sweep file gives, credentials and all,
though their parameters show them redacted (issue #20, item 7)."""

from __future__ import annotations

import base64
import json

import pytest

from helpers import run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, synthetic_model

pytestmark = pytest.mark.usefixtures("prefect_server")

MODELS = ("synth", "synth2")


def _sweep_file(path, model_base: str, judge_base: str, store, versions=("2024-06-01",) * 2):
    entries = "".join(f'\n[[models]]\nmodel = "openai/{name}"\n'
                      f'api_base = "{model_base}?api-version={version}"\n'
                      for name, version in zip(MODELS, versions))
    path.write_text(f"""
store = "{store}"
corpus = "{SAMPLE_CORPUS}"
judge_prompt = "{JUDGE_PROMPT}"
limit = 1
processes = 2

[[judges]]
model = "openai/judge2"
api_base = "{judge_base}"
{entries}""")
    return path


def test_a_child_process_calls_the_real_url_of_an_endpoint_with_credentials(fake, tmp_path):
    fake.responders["synth2"] = synthetic_model
    # User info goes as its own Authorization header (issue #31), a query string in the URL.
    judge_base = fake.url.replace("http://", "http://alice:judge-pw@") + "?code=judge-s3cr3t"
    config = _sweep_file(tmp_path / "sweep.toml", fake.url, judge_base, tmp_path / "store")
    assert run_cli("sweep", ["--config", str(config)]) == 0
    assert fake.calls["synth"] and fake.calls["synth2"] and fake.calls["judge2"]
    for request in fake.requests:  # synth2's pair ran in the child, with its judge
        if request["model"] == "judge2":
            assert "code=judge-s3cr3t" in request["_path"], request["_path"]
            assert request["_authorization"] == "Basic " + base64.b64encode(
                b"alice:judge-pw").decode()
        else:
            assert "api-version=2024-06-01" in request["_path"], request["_path"]
    assert "***" not in json.dumps(fake.requests)


def test_endpoints_that_differ_only_in_credentials_are_refused_before_any_call(
        fake, tmp_path, capsys):
    config = _sweep_file(tmp_path / "sweep.toml", fake.url, fake.url, tmp_path / "store",
                         versions=("2024-06-01", "2025-01-01"))
    assert run_cli("sweep", ["--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"endpoints {fake.url}?api-version=*** differ only in their "
                        "credentials: the evaluations cannot run in several processes "
                        "(processes = 1)"), err
    assert len(err.splitlines()) == 1 and sum(fake.calls.values()) == 0
