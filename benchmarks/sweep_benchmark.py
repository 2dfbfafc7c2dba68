"""A nightly sweep at scale on this machine (issue #9): M models x 624 triggers, one shared
judge, a fixed latency per call, `proactflow sweep` run as a user would. Run by hand:

    .venv/bin/python benchmarks/sweep_benchmark.py                 # 16 models, 2 s per call
    .venv/bin/python benchmarks/sweep_benchmark.py --models 4 --latency 0.5

It prints, measured in this one run: the wall time of an empty Prefect flow (B), the sweep's
wall time against the latency-bound ideal (each model's 624 generations at its concurrency, the
judge's calls at its own, overlapping), CPU seconds per call of the sweep's whole process tree
(the fake endpoint runs in a process of its own and is not counted), the peak calls in flight per
model seen at the endpoint against each limit, whether any request was made twice, and the
process tree's peak RSS (the sum over its processes, sampled). Targets (issue #9): wall <= 1.3 x
ideal + B + 3 s; <= 5 ms of CPU per call; no model above its limit; every call made once; peak
RSS < 1.5 GB. `--processes N` is passed to the sweep (default: the sweep's own choice).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from measure import start_async_fake  # noqa: E402
from run_benchmark import EMPTY_FLOW, build_corpus, child_env, timed  # noqa: E402

sys.path.insert(0, str(ROOT.parent / "tests"))
from replay import JUDGE_PROMPT  # noqa: E402


def _role(cmdline: str) -> str:
    for marker, role in (("process_group", "process group"),
                         ("prefect_server.serve", "Prefect server"),
                         ("prefect.server", "Prefect server"), ("sweep", "sweep")):
        if marker in cmdline:
            return role
    return "other"


def tree_sample(root: int) -> dict[int, tuple[str, float, float]]:
    """pid -> (role, RSS in MB, CPU seconds so far) for `root` and its descendants, from /proc."""
    found, pending, tick = {}, [root], os.sysconf("SC_CLK_TCK")
    while pending:
        pid = pending.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rss = int(next(line.split()[1] for line in status.splitlines()
                           if line.startswith("VmRSS:"))) / 1024
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
            cmdline = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
            found[pid] = (_role(cmdline), rss, cpu)
            for task in Path(f"/proc/{pid}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError, IndexError):  # it ended meanwhile
            continue
    return found


class TreePeak(threading.Thread):
    """Sampled every 0.2 s while the sweep runs: the largest sum of RSS over the tree (the
    Prefect server, the sweep, its process groups; the peak of the sum, not a sum of peaks),
    and per process its largest RSS and its last CPU time seen."""

    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root, self.peak, self.done = root, 0.0, threading.Event()
        self.processes: dict[int, tuple[str, float, float]] = {}
        self.started = time.monotonic()
        self.windows: dict[str, dict[int, float]] = {}
        """role -> 5-second window -> CPU seconds used in it (from the CPU-time deltas)."""

    def run(self) -> None:
        while not self.done.wait(0.2):
            sample = tree_sample(self.root)
            window = int((time.monotonic() - self.started) // 5)
            for pid, (role, _, cpu) in sample.items():
                used = cpu - self.processes.get(pid, (role, 0.0, 0.0))[2]
                cpus = self.windows.setdefault(role, {})
                cpus[window] = cpus.get(window, 0.0) + used
            self.peak = max(self.peak, sum(rss for _, rss, _ in sample.values()))
            for pid, (role, rss, cpu) in sample.items():
                seen = self.processes.get(pid, (role, 0.0, 0.0))
                self.processes[pid] = (role, max(rss, seen[1]), cpu)

    def cpu_timeline(self) -> str:
        """Per role, the share of one core it used in each 5-second window, in percent."""
        last = max((w for cpus in self.windows.values() for w in cpus), default=0)
        return "\n".join(f"  {role:>14}: " + " ".join(f"{100 * cpus.get(w, 0) / 5:3.0f}"
                                                     for w in range(last + 1))
                         for role, cpus in sorted(self.windows.items()))

    def by_role(self) -> str:
        roles: dict[str, list[tuple[float, float]]] = {}
        for role, rss, cpu in self.processes.values():
            roles.setdefault(role, []).append((rss, cpu))
        return "; ".join(f"{role} x{len(v)}: CPU {sum(c for _, c in v):.1f} s, peak RSS "
                         f"{'/'.join(f'{r:.0f}' for r, _ in v)} MB"
                         for role, v in sorted(roles.items()))


@dataclass
class SweepRun:
    """One `proactflow sweep` as timed_sweep measured it."""

    wall: float
    """Seconds from its start to its end."""
    started_at: float
    ended_at: float
    """Unix times of its start and end, to set the fake's timeline against."""
    cpu: float
    """CPU seconds of its whole process tree (this process's children)."""
    sampler: TreePeak
    """Its process tree's peak RSS, and RSS and CPU by process, sampled while it ran."""
    largest_process_mb: float
    """The largest RSS any single process of the tree reached."""


def timed_sweep(config: Path, env: dict[str, str], output: Path,
                extra: list[str] | None = None) -> SweepRun:
    """`proactflow sweep --config CONFIG [extra]` run as a user would, measured; what it printed
    is written to `output`, and its failure ends the benchmark with the last of it."""
    before = os.times()
    started_at = time.time()
    started = time.monotonic()
    process = subprocess.Popen([str(Path(sys.executable).parent / "proactflow"), "sweep",
                                "--config", str(config), *(extra or [])], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = TreePeak(process.pid)
    sampler.start()
    printed = process.stdout.read() if process.stdout else ""
    sampler.done.set()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    ended_at = time.time()
    after = os.times()
    output.write_text(printed, encoding="utf-8")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"sweep failed:\n{printed[-3000:]}")
    cpu = (after.children_user - before.children_user
           + after.children_system - before.children_system)
    return SweepRun(wall, started_at, ended_at, cpu, sampler, usage.ru_maxrss / 1024)


def sweep_file(path: Path, url: str, store: Path, corpus: Path, models: int,
               model_concurrency: int, judge_concurrency: int,
               prompt_cache: str = "auto") -> None:
    entries = "".join(f'\n[[models]]\nmodel = "openai/m{i}"\napi_base = "{url}"\n'
                      f"concurrency = {model_concurrency}\n" for i in range(models))
    path.write_text(f"""store = "{store}"
corpus = "{corpus}"
judge_prompt = "{JUDGE_PROMPT}"
prompt_cache = "{prompt_cache}"

[[judges]]
model = "openai/judge"
api_base = "{url}"
concurrency = {judge_concurrency}
{entries}""", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=16)
    parser.add_argument("--triggers", type=int, default=624)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--model-concurrency", type=int, default=32)
    parser.add_argument("--judge-concurrency", type=int, default=512)
    parser.add_argument("--processes", type=int, help="the sweep's --processes")
    parser.add_argument("--prompt-cache", choices=("auto", "off"), default="auto",
                        help="the sweep file's prompt_cache: auto orders calls for the "
                             "provider's prompt cache (issue #39), off keeps the order before")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="proactflow-sweep-bench-"))
    env = child_env(work / "prefect-home")
    corpus = work / "corpus.jsonl"
    build_corpus(corpus, args.triggers)
    server, port = start_async_fake(args.latency)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        empty_wall, _, _ = timed([sys.executable, "-c", EMPTY_FLOW], env)
        print(f"empty Prefect flow (temporary server included), B: {empty_wall:.1f} s")
        config = work / "sweep.toml"
        sweep_file(config, url, work / "store", corpus, args.models, args.model_concurrency,
                   args.judge_concurrency, args.prompt_cache)
        generations = args.triggers * args.models
        calls = 2 * generations
        per_model = args.triggers / args.model_concurrency * args.latency
        judging = generations / args.judge_concurrency * args.latency
        ideal = max(per_model, judging) + args.latency  # the last judgment follows the last reply
        sweep = timed_sweep(config, env, work / "sweep-output.txt",
                            ["--processes", str(args.processes)] if args.processes else None)
        wall, started_at, ended_at, cpu = sweep.wall, sweep.started_at, sweep.ended_at, sweep.cpu
        sampler = sweep.sampler
        stats = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/stats").read())
        endpoint_cpu = tree_sample(server.pid).get(server.pid, ("", 0.0, 0.0))[2]
    finally:
        server.terminate()
    budget = 1.3 * ideal + empty_wall + 3
    print(f"sweep (prompt_cache = {args.prompt_cache}): {args.models} models x "
          f"{args.triggers} triggers, {calls:,} calls, "
          f"{args.latency:g} s per call, {args.model_concurrency} in flight per model, "
          f"{args.judge_concurrency} for the judge")
    print(f"wall {wall:.1f} s; ideal {ideal:.1f} s; target <= 1.3 x ideal + B + 3 s = "
          f"{budget:.1f} s: {'met' if wall <= budget else 'MISSED'}")
    spans = stats["timeline"]
    first_call = min(first for first, _ in spans.values())
    last_reply = max(last for _, last in spans.values())
    print(f"where the wall time went: {first_call - started_at:.1f} s before the first call; "
          f"models' calls {spans['models'][1] - spans['models'][0]:.1f} s; judge's calls "
          f"{spans['judge'][0] - started_at:.1f}-{spans['judge'][1] - started_at:.1f} s; "
          f"{ended_at - last_reply:.1f} s after the last reply")
    print(f"CPU of the fake endpoint (not counted; it shares the machine's cores): "
          f"{endpoint_cpu:.1f} s")
    print(f"CPU of the sweep's process tree: {cpu:.1f} s, {1000 * cpu / calls:.2f} ms per call "
          f"(target <= 5 ms: {'met' if cpu / calls <= 0.005 else 'MISSED'})")
    peaks = stats["peak"]
    over = {m: p for m, p in peaks.items()
            if p > (args.judge_concurrency if m == "judge" else args.model_concurrency)}
    print(f"peak in flight: judge {peaks.get('judge')}, models "
          f"{min(v for m, v in peaks.items() if m != 'judge')}-"
          f"{max(v for m, v in peaks.items() if m != 'judge')}; above a limit: {over or 'none'}")
    print(f"calls at the endpoint: {sum(stats['calls'].values()):,} (expected {calls:,}); "
          f"request bodies seen twice: {stats['repeats']}")
    print(f"peak RSS of the whole process tree (sampled every 0.2 s): {sampler.peak:.0f} MB "
          f"(target < 1,500 MB: {'met' if sampler.peak < 1500 else 'MISSED'}); largest single "
          f"process: {sweep.largest_process_mb:.0f} MB")
    print(f"the sweep's output: {work / 'sweep-output.txt'}")
    records = [json.loads(path.read_text()) for path in (work / "store" / "runs").glob("*.json")]
    starts = sorted(datetime.fromisoformat(r["started"]).timestamp() for r in records)
    ends = sorted(datetime.fromisoformat(r["finished"]).timestamp() for r in records)
    print(f"the {len(records)} pairs started within {starts[-1] - starts[0]:.1f} s of each other "
          f"and finished within {ends[-1] - ends[0]:.1f} s")
    print(f"by process (CPU until its last sample): {sampler.by_role()}")
    print(f"CPU use per 5 s from the start, % of one core:\n{sampler.cpu_timeline()}")
    print("calls in flight at the endpoint, mean per 5 s from the first call:")
    for role, windows in sorted(stats["in_flight"].items()):
        print(f"  {role:>14}: " + " ".join(f"{windows.get(str(w), 0):3d}"
                                           for w in range(len(windows))))


if __name__ == "__main__":
    main()
