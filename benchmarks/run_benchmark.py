"""Speed, resilience and memory of a full-size run against a fake endpoint with fixed latency.

Run by hand from the repository root (not part of the tests):

    .venv/bin/python benchmarks/run_benchmark.py                      # cold + cached, 624 triggers
    .venv/bin/python benchmarks/run_benchmark.py --faults             # + 10 % 429/500, 5 % bad JSON
    .venv/bin/python benchmarks/run_benchmark.py --rpm 300 --rpm-seconds 60

It builds a corpus of the benchmark's size (624 triggers) by replicating the shared sample
dialogues with fresh ids (each copy's user messages carry a marker so that no two requests are
the same), starts the fake OpenAI-compatible server with a fixed latency per call, and runs
`proactflow run` as a user would, in a subprocess with its own temporary Prefect server. Every
figure is measured in this one run: the empty-flow time is that of a trivial Prefect flow started
the same way, so the targets are ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI, Reply  # noqa: E402
from replay import JUDGE_PROMPT, SHARED, synthetic_judge, synthetic_model  # noqa: E402

SOURCES = [SHARED / "sample_dialogues.jsonl", SHARED / "extra_dialogues.jsonl"]


def build_corpus(path: Path, triggers: int) -> int:
    """Replicate the shared dialogues with fresh ids until exactly `triggers` trigger points."""
    originals = [json.loads(line) for source in SOURCES
                 for line in source.read_text(encoding="utf-8").splitlines() if line]
    rows, total, copy = [], 0, 0
    while total < triggers:
        for original in originals:
            if total >= triggers:
                break
            row = json.loads(json.dumps(original))
            row["unique_id_eval"] = f"{row['unique_id_eval']}__copy{copy}"
            for record in row["turn_records"]:
                if record.get("user_message"):
                    record["user_message"] += f" [copy {copy}]"
            keep = min(len(row["trigger_points"]), triggers - total)
            row["trigger_points"] = row["trigger_points"][:keep]
            total += keep
            rows.append(row)
        copy += 1
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return len(rows)


def faulty(responder, rng: random.Random, lock: threading.Lock, error_rate: float,
           malformed_rate: float = 0.0):
    """Wrap a responder: some attempts get 429/500, some judge replies are malformed JSON."""
    def respond(request):
        with lock:
            roll = rng.random()
        if roll < error_rate / 2:
            return Reply(status=429, content="rate limited", headers={"Retry-After": "0.2"})
        if roll < error_rate:
            return Reply(status=500, content="internal error")
        if roll < error_rate + malformed_rate:
            return Reply(content='{"evaluation_result": {"status": "EVALUATED", "score": ')
        return responder(request)
    return respond


def child_env(home: Path) -> dict[str, str]:
    env = dict(os.environ, PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    env.pop("PREFECT_API_URL", None)
    return env


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB of the child, and its output tail."""
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    output_chunks: list[str] = []
    reader = threading.Thread(target=lambda: output_chunks.append(process.stdout.read()))
    reader.start()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    wall = time.monotonic() - started
    output = "".join(output_chunks)
    if process.returncode != 0:
        raise SystemExit(f"command failed ({process.returncode}):\n{output[-3000:]}")
    return wall, usage.ru_maxrss / 1024, output


EMPTY_FLOW = ("from prefect import flow\n"
              "@flow\n"
              "def empty():\n    return 0\n"
              "empty()\n")
TASK_COUNT = 200
MANY_TASKS_FLOW = ("import time\n"
                   "from prefect import flow, task\n"
                   "@task\n"
                   "def step(i):\n    return i\n"
                   "@flow\n"
                   "def many():\n"
                   "    started = time.perf_counter()\n"
                   f"    for i in range({TASK_COUNT}):\n        step(i)\n"
                   "    print('TASKS_SECONDS', time.perf_counter() - started)\n"
                   "many()\n")


def run_command(fake: FakeOpenAI, corpus: Path, store: Path, concurrency: int,
                *extra: str) -> list[str]:
    return [sys.executable, "-m", "proactflow.cli", "run",
            "--eval-model", "openai/model", "--eval-api-base", fake.url,
            "--judge-model", "openai/judge", "--judge-api-base", fake.url,
            "--corpus", str(corpus), "--judge-prompt", str(JUDGE_PROMPT),
            "--store", str(store), "--concurrency", str(concurrency), *extra]


def scores(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())["aggregate_trigger_stats"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=624)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per fake call")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--faults", action="store_true",
                        help="also run with 10%% 429/500 and 5%% malformed judge replies")
    parser.add_argument("--rpm", type=float, help="also run a rate-limited slice at this rpm")
    parser.add_argument("--rpm-seconds", type=float, default=60.0,
                        help="length of the rate-limited slice (default 60 s)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="proactflow-bench-"))
    corpus = work / "corpus.jsonl"
    dialogues = build_corpus(corpus, args.triggers)
    env = child_env(work / "prefect-home")
    print(f"corpus: {dialogues} dialogues, {args.triggers} triggers; latency {args.latency} s; "
          f"concurrency {args.concurrency}; work dir {work}")

    first_wall, _, _ = timed([sys.executable, "-c", EMPTY_FLOW], env)  # creates Prefect's DB
    empty_wall, empty_rss, _ = timed([sys.executable, "-c", EMPTY_FLOW], env)
    print(f"empty Prefect flow (temporary server included): {empty_wall:.2f} s "
          f"(the very first, which also creates Prefect's database: {first_wall:.2f} s), "
          f"peak RSS {empty_rss:.0f} MB")
    _, _, output = timed([sys.executable, "-c", MANY_TASKS_FLOW], env)
    per_task = float(output.split("TASKS_SECONDS", 1)[1].split()[0]) / TASK_COUNT
    print(f"per tracked task run: {per_task * 1000:.1f} ms ({TASK_COUNT} trivial tasks in one "
          f"flow); one task per call would add {per_task * 2 * args.triggers:.1f} s to a "
          f"{args.triggers}-trigger run")

    with FakeOpenAI({"model": synthetic_model, "judge": synthetic_judge},
                    latency=args.latency) as fake:
        calls_expected = 2 * args.triggers
        ideal = calls_expected * args.latency / args.concurrency
        cold_out = work / "cold-out"
        cold_wall, cold_rss, _ = timed(run_command(fake, corpus, work / "store",
                                                   args.concurrency, "--out", str(cold_out)), env)
        cold_calls, cold_peak = sum(fake.calls.values()), fake.peak_in_flight
        budget = 1.3 * ideal + empty_wall + 2
        print(f"cold run:   {cold_wall:6.2f} s wall, {cold_calls} calls, peak concurrency at "
              f"server {cold_peak}, ideal {ideal:.2f} s (calls x latency / concurrency), "
              f"measured/ideal {cold_wall / ideal:.2f}, measured minus empty flow / ideal "
              f"{(cold_wall - empty_wall) / ideal:.2f}, target <= {budget:.2f} s: "
              f"{'met' if cold_wall <= budget else 'MISSED'}; peak RSS {cold_rss:.0f} MB "
              f"(target < 500: {'met' if cold_rss < 500 else 'MISSED'})")

        fake.reset_counts()
        warm_wall, warm_rss, _ = timed(run_command(fake, corpus, work / "store",
                                                   args.concurrency), env)
        warm_calls = sum(fake.calls.values())
        print(f"cached run: {warm_wall:6.2f} s wall, {warm_calls} calls, target <= "
              f"{empty_wall + 3:.2f} s (empty flow + 3 s): "
              f"{'met' if warm_wall <= empty_wall + 3 and warm_calls == 0 else 'MISSED'}; "
              f"peak RSS {warm_rss:.0f} MB")

    if args.faults:
        rng, lock = random.Random(7), threading.Lock()
        responders = {"model": faulty(synthetic_model, rng, lock, 0.10),
                      "judge": faulty(synthetic_judge, rng, lock, 0.10, malformed_rate=0.05)}
        with FakeOpenAI(responders, latency=args.latency) as fake:
            fault_out = work / "fault-out"
            fault_wall, _, _ = timed(run_command(
                fake, corpus, work / "fault-store", args.concurrency, "--out", str(fault_out),
                "--retry-delay", "0.2"), env)
            metrics = json.loads((fault_out / "metrics.json").read_text())
            not_evaluated = metrics["proactflow"]["not_evaluated"]["OVERALL"]
            same = scores(fault_out) == scores(cold_out)
            print(f"faults run: {fault_wall:6.2f} s wall, {sum(fake.calls.values())} calls for "
                  f"{calls_expected} results (10 % 429/500, 5 % malformed judge JSON); "
                  f"not evaluated {not_evaluated}; scores equal the fault-free run: {same}")

    if args.rpm:
        # Enough triggers for each role to be paced for `rpm_seconds`.
        triggers = max(2, int(args.rpm * args.rpm_seconds / 60))
        small = work / "rpm-corpus.jsonl"
        build_corpus(small, triggers)
        with FakeOpenAI({"model": synthetic_model, "judge": synthetic_judge},
                        latency=args.latency) as fake:
            timed(run_command(fake, small, work / "rpm-store", args.concurrency,
                              "--rpm", str(args.rpm)), env)
            for role in ("model", "judge"):
                times = sorted(t for t, r in zip(fake.call_times, fake.requests)
                               if r["model"] == role)
                window = min(60.0, args.rpm_seconds)
                in_window = sum(1 for t in times if t - times[0] < window)
                rate = in_window / window * 60
                print(f"rpm {args.rpm:g}, {role}: {len(times)} calls; {in_window} in the first "
                      f"{window:g} s = {rate:.1f}/min, {rate / args.rpm:.3f} of the limit "
                      f"(target 0.9-1.0)")


if __name__ == "__main__":
    main()
