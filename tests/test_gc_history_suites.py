"""gc keeps what the history's nights name, for every suite: two nights of one series
(`run --label`), the second at another temperature so that its responses and judgments are
other artifacts, every file three days old, then `gc --keep-latest 1` removes the first
night's run record; each artifact a night names stays (found in its suite's own stage
folders), and `proactflow history` and the side-by-side page of the two nights still work."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable, Iterator

import pytest

from fake_openai import FakeOpenAI
from helpers import cli_args, run_cli
from test_store_admin import age_files

from proactflow.cache.artifacts import ArtifactStore
from proactflow.results.history.nights import read_nights
from proactflow.results.history.compare import with_comparisons
from proactflow.results.history.scores import Finding, pair_frame
from proactflow.suites import get_suite

THREE_DAYS = 3 * 86400
NightArgs = Callable[[Path, str], list[str]]
"""(store, temperature) -> the `run` arguments of one night."""


@contextlib.contextmanager
def proactbench(fake: FakeOpenAI, tmp_path: Path) -> Iterator[NightArgs]:
    yield lambda store, temperature: cli_args(fake, store, extra=(
        "--limit", "2", "--eval-temperature", temperature))


@contextlib.contextmanager
def proactiveagent(fake: FakeOpenAI, tmp_path: Path) -> Iterator[NightArgs]:
    from test_proactiveagent_suite import agent, args, reward_model

    with FakeOpenAI({"agent": agent, "reward": reward_model}) as server:
        yield lambda store, temperature: args(server, store, tmp_path / f"out-{temperature}",
                                              "--eval-temperature", temperature)


@contextlib.contextmanager
def proactivebench_mllm(fake: FakeOpenAI, tmp_path: Path) -> Iterator[NightArgs]:
    from mllm_suite_helpers import expected_mcqa, make_corpus, seeing_model

    corpus, wheel = make_corpus(tmp_path / "mllm", per_dataset=2)
    with FakeOpenAI({"seer": seeing_model(expected_mcqa(corpus, range(2)), [])}) as server:
        yield lambda store, temperature: [
            "--suite", "proactivebench-mllm", "--eval-vision", "--corpus", str(corpus),
            "--package", str(wheel), "--eval-model", "openai/seer", "--eval-api-base",
            server.url, "--eval-temperature", temperature, "--store", str(store)]


@contextlib.contextmanager
def proactivebench_video(fake: FakeOpenAI, tmp_path: Path) -> Iterator[NightArgs]:
    from test_proactivebench_video_suite import args_for, grader, watcher
    from video_fixtures import write_corpus

    from proactflow.suites.proactivebench_video.episode import FrameSets

    corpus = write_corpus(tmp_path / "video")
    video = get_suite("proactivebench-video")
    remembered = video.frame_sets  # type: ignore[attr-defined]
    video.frame_sets = FrameSets()  # type: ignore[attr-defined]
    try:
        with FakeOpenAI({"watcher": watcher, "grader": grader}) as server:
            yield lambda store, temperature: args_for(server, corpus, store,
                                                      "--eval-temperature", temperature)
    finally:  # the video tests count the decodes of their own process: leave none behind
        video.frame_sets = remembered  # type: ignore[attr-defined]


SUITES = {"proactbench": proactbench, "proactiveagent": proactiveagent,
          "proactivebench-mllm": proactivebench_mllm,
          "proactivebench-video": proactivebench_video}


def stored(store: Path) -> set[tuple[str, str]]:
    """(stage folder, key) of every artifact in the store, complete or not (a night of a tiny
    corpus may fall short of the coverage bar: its tables are stored as incomplete)."""
    found, _ = ArtifactStore(store).inventory()
    return {(f.stage, f.key) for f in found if f.versions or f.incomplete}


def named_artifacts(store: ArtifactStore) -> list[tuple[str, str]]:
    """(stage folder, key) of every artifact the recorded nights name, read through each
    night's suite."""
    named = []
    for night in read_nights(store):
        stages = get_suite(night.suite).stages
        for pair in night.pairs:
            named += [(stages.responses, pair["responses"]), (stages.judgments, pair["judgments"])]
    return named


@pytest.mark.usefixtures("prefect_server")
@pytest.mark.timeout(900)  # the first starts the session's Prefect server; 2 cores shared
@pytest.mark.parametrize("suite", sorted(SUITES))
def test_gc_keeps_every_artifact_the_nights_of_a_suite_name(suite, fake, tmp_path, capsys):
    store = tmp_path / "store"
    with SUITES[suite](fake, tmp_path) as night_args:
        for temperature in ("0.7", "0.2"):
            assert run_cli("run", [*night_args(store, temperature), "--label", "nightly"]) \
                in (0, 1)  # 1: coverage below the bar on a tiny corpus, still a night
    nights = read_nights(ArtifactStore(store), series="nightly")
    assert [n.suite for n in nights] == [suite, suite]
    named = named_artifacts(ArtifactStore(store))
    assert len(set(named)) == 4, named  # the second night's artifacts are others
    age_files(store, THREE_DAYS)
    before = stored(store)
    capsys.readouterr()

    assert run_cli("gc", ["--store", str(store), "--keep-latest", "1"]) == 0
    said = capsys.readouterr().out
    assert "removed 1 run records" in said, said  # the first night's run: it is not the latest
    after = stored(store)
    stages = get_suite(suite).stages
    gone = before - after
    assert gone and {stage for stage, _ in gone} == {stages.scores}, said  # the first night's
    for name in named:
        assert name in after, (name, said)
        stage, key = name
        ArtifactStore(store).get_by_key(stage, key).frame()  # readable, not only present

    # The history and the pages of its nights still open.
    out = tmp_path / "history"
    assert run_cli("history", ["--store", str(store), "--out", str(out)]) == 0
    assert (out / "history.html").exists() and (out / "history.csv").exists()
    first, second = (night.pairs[0] for night in read_nights(ArtifactStore(store)))
    found = pair_frame(suite, second)
    assert found is not None
    samples = found[1].filter(found[1]["verdict"].is_not_null())["sample"].unique().sort()[:2]
    finding = Finding("regression", "nightly", suite, first["model"], first["judge"], "g",
                      -1.0, -1.0, -1.0, len(samples), "night 1", "night 2",
                      [{"sample": s, "before": "x", "after": "y"} for s in samples],
                      evaluations=(first["judgments"], second["judgments"]),
                      versions=(first["judgments_version"], second["judgments_version"]))
    [linked] = with_comparisons(ArtifactStore(store), tmp_path / "pages", [finding])
    assert "side_by_side" in linked.links, linked.links
    assert all("view" in change for change in linked.changed)
