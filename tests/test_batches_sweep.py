"""`batch = true` in a sweep file: ProactBench and Proactive Agent (an episode suite: a round
per step across every trace) through the fake batch API, leaderboards equal to the interactive
sweep's."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

from batch_kills import killed_at
from fake_batches import FakeBatches
from ports import reserved_port
from helpers import request_identity, run_cli
from prefect_test_server import reporting_to
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, replay_model, synthetic_judge, synthetic_model
from test_proactiveagent_suite import DATA, agent, reward_model

pytestmark = pytest.mark.usefixtures("prefect_server")


def proactbench_sweep(url: str, folder: Path, batch: str) -> Path:
    config = folder / "sweep.toml"
    folder.mkdir(parents=True, exist_ok=True)
    config.write_text(f"""
store = "{folder / 'store'}"
out = "{folder / 'out'}"
corpus = "{SAMPLE_CORPUS}"
judge_prompt = "{JUDGE_PROMPT}"
batch_poll = 0.05
{batch}

[[judges]]
model = "openai/judge2"
api_base = "{url}"

[[models]]
model = "openai/gen"
api_base = "{url}"

[[models]]
model = "openai/synth"
api_base = "{url}"
""", encoding="utf-8")
    return config


def agent_sweep(url: str, folder: Path, batch: str) -> Path:
    config = folder / "sweep.toml"
    folder.mkdir(parents=True, exist_ok=True)
    config.write_text(f"""
suite = "proactiveagent"
store = "{folder / 'store'}"
out = "{folder / 'out'}"
corpus = "{DATA}"
min_coverage = 0.5
batch_poll = 0.05

[prompts]
agent_system = "{DATA / 'agent_system_prompt.txt'}"
agent_instruction = "{DATA / 'agent_step_instruction.txt'}"
judge = "{DATA / 'reward_system_prompt.txt'}"
judge_instruction = "{DATA / 'reward_instruction.txt'}"

[[judges]]
model = "openai/reward"
api_base = "{url}"
{batch}

[[models]]
model = "openai/agent"
api_base = "{url}"
{batch}
""", encoding="utf-8")
    return config


def leaderboard(folder: Path) -> pl.DataFrame:
    return pl.read_csv(folder / "out" / "leaderboard.csv")


def models_of(suite: str, published) -> dict:
    return ({"gen": replay_model(published), "synth": synthetic_model,
             "judge2": synthetic_judge} if suite == "proactbench"
            else {"agent": agent, "reward": reward_model})


WRITERS = {"proactbench": proactbench_sweep, "agent": agent_sweep}


@dataclass(frozen=True)
class Interactive:
    """A suite's interactive sweep: what the batched sweeps of the module are held to."""

    port: int
    """The fake's port, which every batched sweep's fake of this suite takes in turn: the
    endpoint's address is part of the evaluation's key, and so of the leaderboards compared."""
    asked: Counter
    """Each request the interactive sweep sent, by identity, and how many times."""
    calls: int
    board: pl.DataFrame


@pytest.fixture(scope="module")
def interactive(published, prefect_test_server_url, tmp_path_factory):
    """Each suite's interactive sweep, run once for the module (it is the same for every
    phase a batched sweep is killed in), each on a port the module holds for its suite: that
    suite's batched sweeps start their fakes on it once the interactive one has ended. One port
    a suite, not one for both: a process remembers what an endpoint lists, and the other suite's
    fake lists other models."""
    found: dict[str, Interactive] = {}
    held = ExitStack()  # each suite's port, until the module ends

    def of(suite: str) -> Interactive:
        if suite not in found:
            folder = tmp_path_factory.mktemp(f"interactive-{suite}")
            port = held.enter_context(reserved_port())
            with FakeBatches(models_of(suite, published), completion_delay=0.1,
                             port=port) as fake, \
                    reporting_to(prefect_test_server_url):
                assert run_cli("sweep", ["--config", str(WRITERS[suite](fake.url, folder,
                                                                          ""))]) == 0
                found[suite] = Interactive(
                    port,
                    Counter(request_identity(request) for request in fake.requests),
                    sum(fake.calls.values()), leaderboard(folder))
        return found[suite]

    with held:
        yield of


def test_a_batched_proactbench_sweep_prints_the_interactive_sweeps_tables(published, tmp_path,
                                                                          interactive):
    before = interactive("proactbench")
    with FakeBatches(models_of("proactbench", published), completion_delay=0.1,
                     port=before.port) as fake:
        assert run_cli("sweep", ["--config", str(proactbench_sweep(
            fake.url, tmp_path / "batched", "batch = true"))]) == 0
        assert sum(fake.calls.values()) == 0
        assert sum(fake.lines_submitted.values()) == before.calls
        assert not fake.twice
    assert leaderboard(tmp_path / "batched").equals(before.board)


def test_a_batched_proactive_agent_sweep_runs_a_round_per_step(published, tmp_path,
                                                               interactive):
    before = interactive("agent")
    with FakeBatches(models_of("agent", published), completion_delay=0.05,
                     port=before.port) as fake:
        assert run_cli("sweep", ["--config", str(agent_sweep(
            fake.url, tmp_path / "batched", "batch = true"))]) == 0
        assert sum(fake.calls.values()) == 0
        # The same requests, as many times: the event whose reply is never the protocol's JSON
        # is asked again (5 tries) in a batch of its own each time, as interactively.
        assert Counter(request_identity(request) for request in fake.requests) == before.asked
        # a round per step: the first batch holds the first event of each of the 3 traces
        assert fake.batch_sizes[0] == 3 and len(fake.batch_sizes) < before.calls, \
            fake.batch_sizes
    assert leaderboard(tmp_path / "batched").equals(before.board)


@pytest.mark.parametrize("suite,phase", [(suite, phase) for suite in ("proactbench", "agent")
                                         for phase in ("upload", "create", "retrieve",
                                                       "content")])
def test_a_batched_sweep_killed_in_any_phase_resumes_without_sending_a_line_twice(
        published, tmp_path, prefect_server, interactive, suite, phase):
    """kill -9 of the sweep and every process under it while uploading, after a batch was
    created but before its id was recorded, while waiting, while reading results: the sweep
    started again finds its batches, sends no request twice, and prints the interactive
    sweep's leaderboard."""
    before = interactive(suite)
    with FakeBatches(models_of(suite, published), completion_delay=0.1,
                     port=before.port) as fake:
        config = WRITERS[suite](fake.url, tmp_path / "batched", "batch = true")
        assert killed_at(fake, phase, ["sweep", "--config", str(config)], prefect_server,
                         timeout=240), f"the sweep ended before reaching {phase}"
        assert run_cli("sweep", ["--config", str(config)]) == 0
        # Every request in as many batches as the interactive sweep asked it (once; Proactive
        # Agent's event whose reply never parses, its five tries), the killed sweep's included.
        submitted = Counter(request_identity(line["body"]) for batch in fake.batches.values()
                            for line in batch["_lines"])
        assert submitted == before.asked, submitted - before.asked
        assert sum(fake.calls.values()) == 0  # not one interactive call
    assert leaderboard(tmp_path / "batched").equals(before.board)
