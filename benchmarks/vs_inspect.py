"""Start-up and memory beside inspect_ai (issue #26), on the same work, in one run, alternating.

    python3 -m venv /tmp/inspect-venv && /tmp/inspect-venv/bin/pip install inspect_ai==0.3.285 openai
    .venv/bin/python benchmarks/vs_inspect.py --inspect-venv /tmp/inspect-venv

Both answer ProactBench triggers through the same fake OpenAI-compatible endpoint
(benchmarks/async_fake.py, a process of its own, not counted) with 32 connections:

- proactflow: `proactflow run` as a user runs it (its model under test and its judge: two calls
  per trigger), without PREFECT_API_URL: since issue #26 it reports to no Prefect server.
- with `--before DIR`, a tree before a change too (a checkout of it, e.g. `git archive main |
  tar -x -C DIR`, imported first through PYTHONPATH, same virtual environment): "before" and
  "after" in one run, alternating with the others.
- inspect_ai: `inspect eval` of a small task this script writes: one sample per trigger whose
  input is the very messages proactflow sends for it (read from the triggers table of a first,
  unmeasured proactflow run), solver generate() with inspect's cache on, a scorer that only
  checks a reply came (one call per trigger), through inspect's OpenAI provider.

Figures: the fixed start-up (a 20-trigger run, cold: a new store / a new inspect cache and log
folder, from the command to its exit), and the peak memory of the whole process tree (the
command and every process it starts, the sum of RSS sampled every 0.2 s from /proc by
sweep_benchmark.TreePeak) for a 624-trigger run, cold and cached (the same command again). Each
measurement alternates the two tools, starting with each in turn; medians are printed, with
proactflow / inspect_ai ratios. Both share the machine with whatever else runs on it: run it on
a quiet one for absolute figures; the ratios are what it is for.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from measure import start_async_fake  # noqa: E402
from run_benchmark import build_corpus, child_env  # noqa: E402
from sweep_benchmark import TreePeak  # noqa: E402

sys.path.insert(0, str(ROOT.parent / "tests"))
from replay import JUDGE_PROMPT  # noqa: E402

LITELLM_ALONE_MB = 202
"""What `import litellm` alone costs on the machine of docs/benchmarks.md (issue #26's allowance
beside inspect_ai, which does not use it)."""

TASK = '''
import json
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate

KINDS = {"user": ChatMessageUser, "assistant": ChatMessageAssistant,
         "system": ChatMessageSystem}


@scorer(metrics=[accuracy()])
def replied():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=1 if state.output.completion else 0)
    return score


@task
def triggers(path: str):
    samples = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines()):
        messages = json.loads(line)
        samples.append(Sample(id=number, input=[KINDS[m["role"]](content=m["content"])
                                                for m in messages]))
    return Task(dataset=MemoryDataset(samples), solver=generate(cache=True), scorer=replied())
'''


PARTS: dict[str, str] = {}
"""Per tool, its processes' peak RSS and CPU by role, from its last cold run (TreePeak.by_role)."""


def run_tree(command: list[str], env: dict[str, str], cwd: Path | None = None,
             parts: str | None = None) -> tuple[float, float, float]:
    """Wall seconds from the start to the exit, the process tree's peak RSS in MB, and its CPU
    seconds (the command's and those of the processes it waited for: robust to a shared
    machine, where wall seconds are not); `parts` names the tool whose per-process figures to
    keep."""
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, cwd=cwd)
    sampler = TreePeak(process.pid)
    sampler.start()
    output: list[bytes] = []
    reader = threading.Thread(target=lambda: output.append(process.stdout.read()))
    reader.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    sampler.done.set()
    sampler.join()
    if process.returncode != 0:
        text = b"".join(output).decode(errors="replace")
        raise SystemExit(f"{command[:3]} failed ({process.returncode}):\n{text[-3000:]}")
    if parts:
        PARTS[parts] = sampler.by_role()
    return wall, sampler.peak, usage.ru_utime + usage.ru_stime


class Proactflow:
    def __init__(self, work: Path, url: str, name: str = "proactflow",
                 tree: Path | None = None):
        self.work, self.url, self.runs, self.name = work, url, 0, name
        self.env = child_env(work / "prefect-home")
        if tree is not None:
            self.env["PYTHONPATH"] = str(tree.resolve())

    def command(self, corpus: Path, store: Path) -> list[str]:
        return [sys.executable, "-m", "proactflow.cli", "run",
                "--eval-model", "openai/m0", "--eval-api-base", self.url,
                "--judge-model", "openai/judge", "--judge-api-base", self.url,
                "--corpus", str(corpus), "--judge-prompt", str(JUDGE_PROMPT),
                "--store", str(store), "--concurrency", "32"]

    def fresh(self) -> Path:
        self.runs += 1
        return self.work / f"{self.name.replace(' ', '-')}-{self.runs}"

    def run(self, corpus: Path, place: Path, parts: bool = False
            ) -> tuple[float, float, float]:
        # Not in the repository's folder: `-m` puts the current folder first on sys.path,
        # before the --before tree.
        return run_tree(self.command(corpus, place / "store"), self.env, cwd=self.work,
                        parts=self.name if parts else None)

    def messages(self, corpus: Path, place: Path) -> list[list[dict[str, str]]]:
        """The messages of every evaluable trigger, as proactflow sends them (this tool's
        system prompt is none), from the triggers table a run of it wrote."""
        import polars as pl

        self.run(corpus, place)
        table = next((place / "store" / "artifacts" / "triggers").glob("*.parquet"))
        frame = pl.read_parquet(table).filter(pl.col("evaluable"))
        return [[{"role": m["role"], "content": m["content"]} for m in context]
                for context in frame["context"].to_list()]


class Inspect:
    name = "inspect_ai"

    def __init__(self, work: Path, url: str, venv: Path):
        self.work, self.url, self.runs = work, url, 0
        self.binary = venv / "bin" / "inspect"
        self.task = work / "inspect_task.py"
        self.task.write_text(TASK, encoding="utf-8")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
        self.env.update(OPENAI_API_KEY="not-used", INSPECT_DISPLAY="none")

    def fresh(self) -> Path:
        self.runs += 1
        return self.work / f"inspect-{self.runs}"

    def run(self, dataset: Path, place: Path, parts: bool = False
            ) -> tuple[float, float, float]:
        env = dict(self.env, INSPECT_CACHE_DIR=str(place / "cache"))
        # inspect finds a task file relative to its current folder only
        return run_tree([str(self.binary), "eval", self.task.name, "-T", f"path={dataset}",
                         "--model", "openai/m0", "--model-base-url", self.url,
                         "--max-connections", "32", "--log-dir", str(place / "logs"),
                         "--display", "none"], env, cwd=self.work,
                        parts=self.name if parts else None)


def corpus_of(work: Path, size: int) -> Path:
    """The corpus of `size` triggers, built once."""
    path = work / f"corpus-{size}.jsonl"
    if not path.exists():
        build_corpus(path, size)
    return path


def alternate(rounds: int, tools: list, measure) -> dict[str, list]:
    """`measure(tool)` for each tool, `rounds` times, the first tool alternating."""
    figures: dict[str, list] = {tool.name: [] for tool in tools}
    for number in range(rounds):
        for tool in (tools if number % 2 == 0 else tools[::-1]):
            figures[tool.name].append(measure(tool))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inspect-venv", type=Path, required=True,
                        help="a virtual environment with inspect_ai and openai installed")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tool per figure")
    parser.add_argument("--startup-triggers", type=int, default=20)
    parser.add_argument("--memory-triggers", type=int, default=624)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per fake call")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="a checkout of the tree before a change, measured beside")
    args = parser.parse_args()
    if not (args.inspect_venv / "bin" / "inspect").exists():
        raise SystemExit(f"no inspect in {args.inspect_venv}/bin: install inspect_ai there")

    work = Path(tempfile.mkdtemp(prefix="proactflow-vs-inspect-"))
    fake, port = start_async_fake(args.latency)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        ours, theirs = Proactflow(work, url), Inspect(work, url, args.inspect_venv)
        ours_before = [Proactflow(work, url, "proactflow before", args.before)] \
            if args.before else []
        tools = [ours, *ours_before, theirs]
        if ours_before:  # its first run (not measured) creates its Prefect database
            ours_before[0].run(corpus_of(work, args.startup_triggers), ours_before[0].fresh())
        corpora, datasets = {}, {}
        for size in (args.startup_triggers, args.memory_triggers):
            corpora[size] = corpus_of(work, size)
            # A first proactflow run (not measured) gives the messages inspect_ai sends.
            messages = ours.messages(corpora[size], ours.fresh())
            datasets[size] = work / f"dataset-{size}.jsonl"
            datasets[size].write_text("".join(json.dumps(m) + "\n" for m in messages),
                                      encoding="utf-8")
        theirs.run(datasets[args.startup_triggers], theirs.fresh())  # its first run: not measured
        print(f"work dir {work}; fake endpoint latency {args.latency} s; {args.rounds} rounds; "
              f"inspect_ai {args.inspect_venv}; load average {os.getloadavg()[0]:.1f}")

        def inputs(tool, size: int) -> Path:
            return datasets[size] if tool is theirs else corpora[size]

        startup = alternate(args.rounds, tools, lambda tool: tool.run(
            inputs(tool, args.startup_triggers), tool.fresh()))

        def cold_then_cached(tool) -> tuple[float, ...]:
            place = tool.fresh()
            cold = tool.run(inputs(tool, args.memory_triggers), place, parts=True)
            cached = tool.run(inputs(tool, args.memory_triggers), place)
            return (*cold, *cached)
        memory = alternate(args.rounds, tools, cold_then_cached)
    finally:
        fake.terminate()
        fake.wait()

    def median(values) -> float:
        return statistics.median(values)

    def ratio(figures: dict[str, list], name: str, at: int) -> tuple[float, float, float]:
        ours_figure = median(m[at] for m in figures[name])
        theirs_figure = median(m[at] for m in figures[theirs.name])
        return ours_figure, theirs_figure, ours_figure / theirs_figure

    print(f"load average at the end {os.getloadavg()[0]:.1f} (1 min), "
          f"{os.getloadavg()[1]:.1f} (5 min), {os.cpu_count()} cores")
    for name in (tool.name for tool in tools if tool is not theirs):
        wall, cpu = ratio(startup, name, 0), ratio(startup, name, 2)
        print(f"start-up, {args.startup_triggers} triggers cold (medians, command to exit): wall "
              f"{name} {wall[0]:.2f} s, inspect_ai {wall[1]:.2f} s: ratio {wall[2]:.2f}; CPU "
              f"of the tree {name} {cpu[0]:.2f} s, inspect_ai {cpu[1]:.2f} s: ratio "
              f"{cpu[2]:.2f} (walls: {name} {', '.join(f'{m[0]:.2f}' for m in startup[name])}; "
              f"inspect_ai {', '.join(f'{m[0]:.2f}' for m in startup[theirs.name])})")
        for label, at in (("cold", 0), ("cached", 3)):
            wall, peak, cpu = (ratio(memory, name, at + offset) for offset in range(3))
            print(f"{args.memory_triggers} triggers {label}: peak RSS of the process tree "
                  f"{name} {peak[0]:.0f} MB, inspect_ai {peak[1]:.0f} MB: ratio {peak[2]:.2f}, "
                  f"difference {peak[0] - peak[1]:+.0f} MB (allowance: inspect_ai + "
                  f"{LITELLM_ALONE_MB} MB = {peak[1] + LITELLM_ALONE_MB:.0f} MB); wall {name} "
                  f"{wall[0]:.2f} s, inspect_ai {wall[1]:.2f} s: ratio {wall[2]:.2f}; CPU "
                  f"{name} {cpu[0]:.2f} s, inspect_ai {cpu[1]:.2f} s: ratio {cpu[2]:.2f}")
    for name, parts in PARTS.items():
        print(f"{name}, its last cold {args.memory_triggers}-trigger run by process: {parts}")


if __name__ == "__main__":
    main()
