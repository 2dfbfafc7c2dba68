"""A store holding evaluations of all four suites, made through the CLI against fake servers on
each suite's test corpus: what the viewer and report tests open."""

from __future__ import annotations

from pathlib import Path

from fake_openai import FakeOpenAI
from helpers import run_cli
from mllm_suite_helpers import expected_mcqa, make_corpus, seeing_model
from replay import SAMPLE_CORPUS, SAMPLE_RESULTS
from test_proactiveagent_suite import agent, args as agent_args, reward_model
from test_proactivebench_video_suite import args_for as video_args, grader, watcher
from video_fixtures import write_corpus

from proactflow.suites import get_suite
from proactflow.suites.proactivebench_video.episode import FrameSets


def four_suites(root: Path) -> Path:
    """The store: ProactBench (imported published results), Proactive Agent, the multimodal
    suite (MCQA, with the environment's crops) and the video suite, one model each."""
    store = root / "store"
    assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store), "--judge-model", "openai/judge2"]) == 0
    with FakeOpenAI({"agent": agent, "reward": reward_model}) as fake:
        assert run_cli("run", agent_args(fake, store, root / "agent-out")) in (0, 1)
    corpus, wheel = make_corpus(root / "mllm", per_dataset=3)
    expected = expected_mcqa(corpus, range(3))
    wrong: list[str] = []
    with FakeOpenAI({"seer": seeing_model(expected, wrong)}) as fake:
        assert run_cli("run", ["--suite", "proactivebench-mllm", "--eval-vision",
                               "--corpus", str(corpus),
                               "--package", str(wheel), "--eval-model", "openai/seer",
                               "--eval-api-base", fake.url, "--store", str(store),
                               "--out", str(root / "mllm-out")]) in (0, 1)
    video_corpus = write_corpus(root / "video")
    video = get_suite("proactivebench-video")
    remembered = video.frame_sets  # type: ignore[attr-defined]
    video.frame_sets = FrameSets()  # type: ignore[attr-defined]
    try:
        with FakeOpenAI({"watcher": watcher, "grader": grader}) as fake:
            assert run_cli("run", [*video_args(fake, video_corpus, store),
                                   "--out", str(root / "video-out")]) == 0
    finally:  # the video tests count the decodes of their own process: leave none behind
        video.frame_sets = remembered  # type: ignore[attr-defined]
    return store
