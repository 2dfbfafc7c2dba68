"""`run --batch` with Anthropic models end to end, through the fake Messages and Message Batches
APIs (tests/fake_anthropic_batches.py): the batched run's tables and cache records equal the
interactive run's, and not one line is submitted twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_anthropic_batches import FakeAnthropic
from helpers import cli_args, run_cli
from replay import ANSWERABLE, replay_judge, replay_model
from test_batches import call_records, tables

pytestmark = pytest.mark.usefixtures("prefect_server")

FAST = ("--batch", "--batch-poll", "0.05")
KEY = "sk-ant-fake-key"


@pytest.fixture
def claude(published, monkeypatch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", KEY)
    server = FakeAnthropic({"claude-gen": replay_model(published),
                            "claude-judge": replay_judge(published)},
                           api_key=KEY, completion_delay=0.1)
    with server:
        yield server
    assert not server.responder_errors, server.responder_errors


def args(fake: FakeAnthropic, store: Path, extra: tuple[str, ...] = ()) -> list[str]:
    return cli_args(fake, store, eval_model="anthropic/claude-gen",  # type: ignore[arg-type]
                    judge_model="anthropic/claude-judge",
                    extra=("--eval-api-key-env", "FAKE_ANTHROPIC_KEY",
                           "--judge-api-key-env", "FAKE_ANTHROPIC_KEY", *extra))


def test_batched_anthropic_run_equals_interactive_run(claude, tmp_path):
    interactive, batched = tmp_path / "interactive", tmp_path / "batched"
    assert run_cli("run", args(claude, interactive)) == 0
    asked = sum(claude.interactive_calls.values())
    assert asked and not claude.submitted

    assert run_cli("run", args(claude, batched, FAST)) == 0
    assert sum(claude.interactive_calls.values()) == asked  # not one interactive call
    assert sum(claude.submitted.values()) == asked and set(claude.submitted.values()) == {1}
    assert len(claude.batches) >= 2  # generation, then judging
    first = next(iter(claude.batches.values()))
    assert len(first.lines) == ANSWERABLE
    sent = sorted(json.dumps(params, sort_keys=True) for params in claude.batch_params)
    asked_interactively = sorted(json.dumps(body, sort_keys=True)
                                 for body in claude.interactive_bodies)
    assert sent == asked_interactively  # the same /v1/messages bodies

    assert tables(batched).keys() == tables(interactive).keys()
    for stage, frame in tables(interactive).items():
        assert tables(batched)[stage].equals(frame), stage
    assert call_records(batched) == call_records(interactive)
