"""CPU per call and peak memory of the text path and of each suite, small enough for CI (about
two minutes alone on 2 cores): printed as figures, never asserted, so that a change costing 40 %
more per call shows in the CI log of the commit that made it. `.ci/run` runs it before the
tests:

    .venv/bin/python benchmarks/ci_figures.py

Figures (how each is taken: benchmarks/measure.py):
- the call edge: `ChatClient.call` (per-call cache, lease, limits, litellm, HTTP) in this
  process, a few hundred text calls against an asyncio fake endpoint in a process of its own;
  no Prefect, no stages: the steadiest figure, and the one every suite pays per call;
- each suite (ProactBench, Proactive Agent's ProactiveBench, the multimodal and the video
  ProactiveBench): one cold `proactflow run` as a user runs it, against the tests' fake server
  (replies at once); CPU per call is that of the run's process over its calls after the first
  fifth (RUNNER: start-up, warm-up and exports left out, so a few hundred calls give a steady
  figure), peak memory that of the run's largest process.
The data is the tests' (shared sample dialogues, tests/data/proactiveagent, a generated
multimodal corpus and a generated clip): nothing is downloaded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))
sys.path.insert(0, str(ROOT / "tests"))

from measure import child_env, measured, start_async_fake  # noqa: E402

EDGE_CALLS = 400
TEXT_TRIGGERS = 200
AGENT_COPIES = 10
MLLM_PER_DATASET = 12
VIDEO_SECONDS = 120


def edge_ms_per_call(calls: int) -> float:
    """CPU of this process per `ChatClient.call` over HTTP, 32 at once, after a warm-up."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm's import
    import litellm

    from proactflow.cache.calls import open_call_store
    from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
    from proactflow.limits.inflight import model_limit
    from proactflow.limits.model_limits import target
    from proactflow.providers.chat import ChatRequest
    from proactflow.providers.litellm_setup import set_up_litellm
    from proactflow.providers.llm import ChatClient

    del litellm  # imported before the clock starts
    set_up_litellm()  # as the commands do before their first call (no longer on import)
    endpoint, port = start_async_fake(0.02)
    try:
        folder = Path(tempfile.mkdtemp(prefix="proactflow-edge-"))

        async def run() -> float:
            store = open_call_store(folder / "calls")
            role = ModelRole(model="openai/m0", api_base=f"http://127.0.0.1:{port}/v1",
                             generation=Generation(temperature=0.0, max_tokens=64, top_p=None))
            limit = model_limit(target(role.model, role.endpoint), 32, store,
                                folder / "coordination")
            client = ChatClient(role, store, RuntimeOptions(concurrency=32), in_flight=limit)
            gate = asyncio.Semaphore(32)

            async def one(index: int) -> None:
                async with gate:
                    await client.call(ChatRequest.build(role, [
                        ("system", "You watch a user at work. " * 20),
                        ("user", f"Event {index}: the user opens a file. " * 30)]))

            await asyncio.gather(*(one(i) for i in range(32)))  # connections, first-call work
            started = time.process_time()
            await asyncio.gather(*(one(i) for i in range(32, 32 + calls)))
            used = time.process_time() - started
            await store.close()
            return used

        used = asyncio.run(run())
        shutil.rmtree(folder, ignore_errors=True)
        return 1000 * used / calls
    finally:
        endpoint.terminate()
        endpoint.wait()


class Suite:
    """One suite's small run: `prepare` writes its data and returns the command's arguments
    (from `run` on, after a synthetic wheel for RUNNER to register) and the fake server's
    responders; `codes`: the exit codes of a run that went through."""

    def __init__(self, name: str, prepare: Callable[[Path], tuple[list[str], dict]],
                 codes: tuple[int, ...] = (0,)):
        self.name, self.prepare, self.codes = name, prepare, codes


def proactbench(work: Path) -> tuple[list[str], dict]:
    import run_benchmark
    from replay import JUDGE_PROMPT, PROJECT_DATA, synthetic_judge, synthetic_model

    if not all(source.exists() for source in run_benchmark.SOURCES):  # no ../shared beside
        run_benchmark.SOURCES = [PROJECT_DATA / "dialogues.jsonl"]  # the tests' own dialogues
    run_benchmark.build_corpus(work / "corpus.jsonl", TEXT_TRIGGERS)
    return (["run", "--corpus", str(work / "corpus.jsonl"), "--judge-prompt", str(JUDGE_PROMPT),
             "--eval-model", "openai/model", "--judge-model", "openai/judge"],
            {"model": synthetic_model, "judge": synthetic_judge})


def proactiveagent(work: Path) -> tuple[list[str], dict]:
    """The tests' three traces, each copied AGENT_COPIES times with its events marked (so no two
    requests are alike), all in one split."""
    from fake_openai import Reply
    from replay import PROJECT_DATA
    from test_proactiveagent_suite import proposes, reward_model

    def agent(request: dict) -> Reply:  # always the protocol's JSON: no reply asked again
        task = "Help with it" if proposes(request["messages"][-1]["content"]) else None
        return Reply(content=json.dumps({"Purpose": "p", "Thoughts": "t",
                                         "Proactive Task": task, "Response": "null"}))

    data, corpus = PROJECT_DATA / "proactiveagent", work / "proactiveagent"
    shutil.copytree(data, corpus)
    splits = json.loads((data / "splits.json").read_text(encoding="utf-8"))
    originals = sorted({name for split in splits.values() for name in split["files"]})
    files = []
    for copy in range(AGENT_COPIES):
        for name in originals:
            events = json.loads((data / name).read_text(encoding="utf-8"))
            for event in events:
                event["observation"]["event"] += f" (copy {copy})"
            files.append(f"{name[:-5]}_copy{copy}.json")
            (corpus / files[-1]).write_text(json.dumps(events), encoding="utf-8")
    (corpus / "splits.json").write_text(json.dumps({"ci_all": {"theme": "All", "files": files}}),
                                        encoding="utf-8")
    return (["run", "--suite", "proactiveagent", "--corpus", str(corpus),
             "--eval-model", "openai/agent", "--judge-model", "openai/reward",
             "--eval-system-prompt-file", str(corpus / "agent_system_prompt.txt"),
             "--judge-prompt", str(corpus / "reward_system_prompt.txt"),
             "--prompt", f"agent_instruction={corpus / 'agent_step_instruction.txt'}",
             "--prompt", f"judge_instruction={corpus / 'reward_instruction.txt'}"],
            {"agent": agent, "reward": reward_model})


RUNNER = """
import sys, time
import litellm
replied = []  # the process's CPU time at each reply
paid = litellm.acompletion


async def timed(*args, **kwargs):
    try:
        return await paid(*args, **kwargs)
    finally:
        replied.append(time.process_time())

litellm.acompletion = timed  # ChatClient takes litellm.acompletion when it is made
if sys.argv[1].endswith(".whl"):  # the multimodal suite, on a synthetic package
    import hashlib
    from proactflow.suites import register_suite
    from proactflow.suites.proactivebench_mllm.suite import ProactiveBenchMllm
    wheel = sys.argv.pop(1)
    register_suite(ProactiveBenchMllm(hashlib.sha256(open(wheel, "rb").read()).hexdigest()))
from proactflow.cli import main
code = main(sys.argv[1:])
first = len(replied) // 5  # the first fifth warms up: lazy imports, connections, first rows
print("CALLS_WINDOW", len(replied), len(replied) - 1 - first,
      replied[-1] - replied[first] if replied else 0.0)
sys.exit(code)
"""
"""Runs the CLI, noting the CPU time of the run's process at each reply: CPU per call is taken
from the reply after the first fifth of the calls to the last one, so it holds the calls and
all the run does meanwhile (rows, the stream between stages, the judge, Prefect's logging) but
not its start-up, the first calls' lazy imports and connections, or the exports."""


def mllm(work: Path) -> tuple[list[str], dict]:
    from mllm_benchmark import letter_by_hash
    from mllm_corpus import generate_corpus
    from mllm_suite_helpers import synthetic_wheel

    generate_corpus(work / "corpus", per_dataset=MLLM_PER_DATASET)
    wheel = synthetic_wheel(work / "proactivebench.whl", range(MLLM_PER_DATASET))
    return ([str(wheel), "run", "--suite", "proactivebench-mllm", "--eval-vision", "--corpus",
             str(work / "corpus"), "--package", str(wheel), "--eval-model", "openai/model"],
            {"model": letter_by_hash})


def video(work: Path) -> tuple[list[str], dict]:
    import video_frames
    from video_episode import judge, model, write_corpus

    corpus = work / "corpus"
    video_frames.SECONDS = VIDEO_SECONDS  # the clip write_clip makes
    write_corpus(corpus, (160, 96, 2), VIDEO_SECONDS, (20, 60, 99), "ci")
    return (["run", "--suite", "proactivebench-video", "--eval-vision", "--corpus", str(corpus),
             "--parts", "EGO",
             "--eval-model", "openai/watcher", "--judge-model", "openai/grader"],
            {"watcher": model, "grader": judge})


SUITES = [Suite("ProactBench (text)", proactbench),
          Suite("Proactive Agent", proactiveagent),
          # 1: a sample the environment crashes on is counted apart (not scored), as upstream
          Suite("multimodal ProactiveBench", mllm, codes=(0, 1)),
          Suite("video ProactiveBench", video)]


def run_suite(suite: Suite, work: Path, env: dict[str, str]) -> str:
    from fake_openai import FakeOpenAI

    work.mkdir(parents=True)
    args, responders = suite.prepare(work)
    with FakeOpenAI(responders) as fake:
        bases = [*(["--eval-api-base", fake.url] if "--eval-model" in args else []),
                 *(["--judge-api-base", fake.url] if "--judge-model" in args else [])]
        command = [sys.executable, "-c", RUNNER, *args, *bases, "--store", str(work / "store"),
                   "--concurrency", "32"]
        cold = measured(command, env, codes=suite.codes)
        served = sum(fake.calls.values())
    calls, counted, window_cpu = cold.output.rsplit("CALLS_WINDOW", 1)[1].split()[:3]
    per_call = 1000 * float(window_cpu) / max(int(counted), 1)
    return (f"{suite.name:>26}: {per_call:5.2f} ms CPU per call ({calls} calls, {served} at the "
            f"server); peak RSS {cold.peak_rss_mb:.0f} MB; the whole run {cold.cpu_s:.1f} s CPU "
            f"(its process tree), {cold.wall_s:.1f} s wall")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["edge", "proactbench", "proactiveagent", "mllm",
                                           "video"], action="append",
                        help="measure only these (repeatable); default: all")
    args = parser.parse_args()
    chosen = set(args.only or ["edge", "proactbench", "proactiveagent", "mllm", "video"])
    started = time.monotonic()
    print(f"benchmarks/ci_figures.py: figures of this commit ({os.cpu_count()} CPUs; CPU "
          "time is robust to other load, wall time is not)", flush=True)
    failed = []
    if "edge" in chosen:
        try:
            print(f"{'call edge (text)':>26}: {edge_ms_per_call(EDGE_CALLS):5.2f} ms CPU per "
                  f"call ({EDGE_CALLS} calls, 32 at once, litellm over HTTP)", flush=True)
        except Exception as exc:  # the suites are measured still
            failed.append("edge")
            print(f"{'call edge (text)':>26}: FAILED, no figure: {exc!r}", flush=True)
    keys = {"ProactBench (text)": "proactbench", "Proactive Agent": "proactiveagent",
            "multimodal ProactiveBench": "mllm", "video ProactiveBench": "video"}
    work = Path(tempfile.mkdtemp(prefix="proactflow-ci-figures-"))
    # One Prefect home for every run; a loaded CI host gets a generous start-up wait.
    env = dict(child_env(work / "prefect-home"),
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180")
    try:
        for suite in SUITES:
            if keys[suite.name] in chosen:
                try:
                    print(run_suite(suite, work / keys[suite.name], env), flush=True)
                except (Exception, SystemExit) as exc:  # the other suites are measured still
                    failed.append(suite.name)
                    print(f"{suite.name:>26}: FAILED, no figure: {exc}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"(measured in {time.monotonic() - started:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
