"""Limits per model in sweep files and settings: where each run takes them from, the one-line
errors of bad values, and that they enter no key."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from helpers import run_cli
from proactflow.common.errors import UserError
from proactflow.config.settings import RunSettings, RuntimeOptions
from proactflow.limits.model_limits import Limits
from proactflow.providers.chat import ChatRequest
from proactflow.run.pipeline import suite_of
from proactflow.run.stage_keys import StageKeys
from proactflow.suites.base import DataSource, Prompts
from proactflow.suites.sources import Prompt
from proactflow.sweeps.sweep_file import load_sweep

SWEEP = """
store = "{store}"
{top}

[[judges]]
model = "openai/judge"
api_base = "http://127.0.0.1:9/v1"
{judge}

[[models]]
model = "gpt-4o-mini"

[[models]]
model = "openai/my-model"
api_base = "http://127.0.0.1:9/v1"
{model}
"""


def sweep_file(tmp_path: Path, top: str = "", judge: str = "", model: str = "") -> Path:
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP.format(store=tmp_path / "store", top=top, judge=judge, model=model))
    return path


def test_each_entry_has_its_own_limits_and_the_top_level_ones_are_defaults(tmp_path):
    config = load_sweep(sweep_file(tmp_path, top="concurrency = 5\nrpm = 100",
                                   judge="concurrency = 3\ntpm = 50000",
                                   model="rpm = 30.5"))
    runs = config.runs()
    assert len(runs) == 2
    for run in runs:
        assert run.runtime.limits(run.judge) == Limits(concurrency=3, rpm=100, tpm=50000)
    first, second = runs
    assert first.runtime.limits(first.model_under_test) == Limits(concurrency=5, rpm=100)
    assert second.runtime.limits(second.model_under_test) == Limits(concurrency=5, rpm=30.5)
    # Without any, a role keeps to the run's options: `proactflow run`'s flags, per role.
    plain = load_sweep(sweep_file(tmp_path)).runs()[0]
    assert plain.runtime.limits(plain.judge) == Limits(concurrency=16)


@pytest.mark.parametrize("where, text, entry, key", [
    ("model", "concurrency = 0", "models[2] (openai/my-model)", "concurrency"),
    ("model", "concurrency = -4", "models[2] (openai/my-model)", "concurrency"),
    ("model", 'concurrency = "three"', "models[2] (openai/my-model)", "concurrency"),
    ("model", "concurrency = 2.5", "models[2] (openai/my-model)", "concurrency"),
    ("model", "concurrency = true", "models[2] (openai/my-model)", "concurrency"),
    ("model", "concurrency = 5000", "models[2] (openai/my-model)", "concurrency"),
    ("judge", "rpm = 0", "judges[1] (openai/judge)", "rpm"),
    ("judge", "rpm = -60", "judges[1] (openai/judge)", "rpm"),
    ("judge", 'rpm = "fast"', "judges[1] (openai/judge)", "rpm"),
    ("judge", "rpm = inf", "judges[1] (openai/judge)", "rpm"),
    ("judge", "tpm = 0", "judges[1] (openai/judge)", "tpm"),
    ("judge", 'tpm = "lots"', "judges[1] (openai/judge)", "tpm"),
    ("model", "concurency = 4", "models[2] (openai/my-model)", "concurency"),
    ("top", "concurrency = 0", None, "concurrency"),
    ("top", "rpm = -1", None, "rpm"),
    ("top", 'tpm = "x"', None, "tpm"),
])
def test_a_bad_limit_is_one_line_naming_file_entry_and_key(tmp_path, where, text, entry, key):
    path = sweep_file(tmp_path, **{where: text})
    with pytest.raises(UserError) as refused:
        load_sweep(path)
    message = str(refused.value)
    assert "\n" not in message
    prefix = f"{path}: {entry}: {key}: " if entry else f"{path}: {key}: "
    assert message.startswith(prefix), message
    if key == "concurency":
        assert message == prefix + "unknown key"


def test_the_cli_stops_on_a_bad_limit_before_any_call(tmp_path, capsys, prefect_server):
    with FakeOpenAI() as fake:
        path = sweep_file(tmp_path, judge="concurrency = 0")
        assert run_cli("sweep", ["--config", str(path)]) == 2
        assert sum(fake.calls.values()) == 0
    err = capsys.readouterr().err
    assert err == (f"proactflow: error: {path}: judges[1] (openai/judge): concurrency: Input "
                   f"should be greater than or equal to 1, got 0\n")


def test_limits_enter_no_key(tmp_path):
    """Artifact keys and per-call cache keys of a role with limits are those of one without."""
    plain, limited = (load_sweep(sweep_file(tmp_path, top=top, judge=judge, model=model)).runs()
                      for top, judge, model in (
                          ("", "", ""),
                          ("concurrency = 7\nrpm = 10\ntpm = 999",
                           "concurrency = 3\nrpm = 60\ntpm = 1000", "concurrency = 2")))
    for before, after in zip(plain, limited):
        assert after.judge.limits != before.judge.limits  # they are there...
        assert after.runtime != before.runtime
        assert after.judge.key_material() == before.judge.key_material()  # ...and in no key
        assert after.model_under_test.key_material() == before.model_under_test.key_material()
        suite = suite_of(before)
        source = DataSource(revision="0" * 64, description="dialogues.jsonl")
        prompts = Prompts({"judge": Prompt("Judge this.", "1" * 64, "judge.txt")})
        keys = []
        for settings in (before, after):
            stage_keys = StageKeys(suite, settings)
            samples = stage_keys.samples(source).key
            responses = stage_keys.responses(samples, Prompts()).key
            keys.append((samples, responses,
                         stage_keys.judgments(responses, prompts).key,
                         ChatRequest.build(settings.judge, [("user", "q")]).key,
                         ChatRequest.build(settings.model_under_test, [("user", "q")]).key))
        assert keys[0] == keys[1]


def test_prefect_parameters_carry_the_limits(tmp_path):
    """A sweep's settings go to Prefect as JSON and come back: the limits with them."""
    run = load_sweep(sweep_file(tmp_path, judge="concurrency = 3\nrpm = 60")).runs()[0]
    again = RunSettings.model_validate(run.model_dump(mode="json"))
    assert again.judge.limits == Limits(concurrency=3, rpm=60)
    assert isinstance(again.runtime, RuntimeOptions)
