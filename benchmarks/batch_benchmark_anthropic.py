"""The nightly sweep of sweep_benchmark.py in batch mode (issue #29 item 7): M priced Anthropic
models x N triggers and a priced judge, `batch = true` in the sweep file, `proactflow sweep` run
as a user would, against the fake Messages and Message Batches APIs (tests/fake_anthropic_batches)
whose batches finish their lines over a set delay. Run by hand:

    .venv/bin/python benchmarks/batch_benchmark_anthropic.py                       # 16 models, 60 s
    .venv/bin/python benchmarks/batch_benchmark_anthropic.py --models 4 --triggers 100 --delay 10

It prints, measured in this one run: the dollars of the tokens the fake answered, at the price
map's batch prices (`input_cost_per_token_batches`, `output_cost_per_token_batches`) against its
interactive ones, per model and in all, beside what the sweep's run records say it paid (at
batch prices) and estimated; CPU seconds per call of the sweep's process tree (the fake runs in a process of
its own and is not counted); the wall time beyond the fake's delay (a round of generation
batches, then the judging batches: ideal 2 x delay, plus B, an empty Prefect flow); and how
many lines the fake got twice (0 expected).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests"))
from run_benchmark import EMPTY_FLOW, build_corpus, child_env, timed  # noqa: E402
from sweep_benchmark import timed_sweep  # noqa: E402
from ports import free_port  # noqa: E402
from replay import JUDGE_PROMPT  # noqa: E402

MODELS = ("claude-haiku-4-5", "claude-sonnet-4-5", "claude-sonnet-5", "claude-sonnet-5-5",
          "claude-sonnet-4-6", "claude-opus-4-5", "claude-opus-4-6", "claude-opus-4-7",
          "claude-fable-5", "claude-fable-5-1", "claude-opus-5-5", "claude-opus-5",
          "claude-opus-4-8", "claude-mythos-5", "claude-mythos-5-1", "claude-haiku-5-5")
"""Anthropic models the bundled price map prices both ways (interactive and batch)."""
JUDGE = "claude-haiku-4-5-20251001"
KEY_VARIABLE = "BATCH_BENCH_ANTHROPIC_KEY"
KEY = "sk-ant-benchmark"


def serve(port: int, delay: float) -> None:
    """The fake, in this process: the models answer like the tests' synthetic model with their
    own marker (so that each model's judge requests differ), the judge like the synthetic judge."""
    from fake_anthropic_batches import FakeAnthropic
    from fake_openai import Reply
    from replay import synthetic_judge, synthetic_model

    def marked(name: str):
        return lambda request: Reply(content=f"[{name}] {synthetic_model(request).content}")

    responders = {name: marked(name) for name in MODELS}
    responders[JUDGE] = synthetic_judge
    FakeAnthropic(responders, api_key=KEY, completion_delay=delay, port=port).serve()


def sweep_file(path: Path, url: str, store: Path, corpus: Path, models: int,
               poll: float) -> None:
    def entry(table: str, model: str) -> str:
        return (f'\n[[{table}]]\nmodel = "anthropic/{model}"\napi_base = "{url}"\n'
                f'api_key_env = "{KEY_VARIABLE}"\n')

    path.write_text(f"""store = "{store}"
corpus = "{corpus}"
judge_prompt = "{JUDGE_PROMPT}"
batch = true
batch_poll = {poll}
{entry("judges", JUDGE)}{"".join(entry("models", m) for m in MODELS[:models])}""",
                    encoding="utf-8")


def dollars(usage: dict[str, list[int]]) -> list[tuple[str, float, float]]:
    """(model, interactive $, batch $) of the tokens each model was answered with."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    from proactflow.batches.pricing import batch_cost

    rows = []
    for model, (prompt, completion) in sorted(usage.items()):
        interactive = sum(litellm.cost_per_token(model=model, prompt_tokens=prompt,
                                                 completion_tokens=completion))
        rows.append((model, interactive, batch_cost(model, prompt, completion) or 0.0))
    return rows


def empty_flow_wall(env: dict[str, str]) -> float:
    """B: an empty Prefect flow's wall time, temporary server included. On a loaded machine
    Prefect's temporary server can miss its start-up deadline: tried twice, else 0 (said)."""
    for _ in range(2):
        try:
            wall, _, _ = timed([sys.executable, "-c", EMPTY_FLOW], env)
        except SystemExit:
            continue
        print(f"empty Prefect flow (temporary server included), B: {wall:.1f} s")
        return wall
    print("empty Prefect flow: its temporary server did not start in time twice; B taken as 0")
    return 0.0


def submitted_twice(submitted: dict[str, int]) -> int:
    """Requests in more than one line, by their key (a line's custom_id also carries its
    batch's tag)."""
    from collections import Counter

    from proactflow.batches.anthropic_wire import split_wire_id

    per_key: Counter[str] = Counter()
    for wire_id, times in submitted.items():
        ids = split_wire_id(wire_id)
        per_key[ids[1] if ids else wire_id] += times
    return sum(1 for times in per_key.values() if times > 1)


def recorded_costs(store: Path) -> tuple[float, float]:
    """(paid, estimated) dollars over the run records of the sweep: what proactflow says."""
    paid = estimated = 0.0
    for path in (store / "runs").glob("*.json"):
        for usage in json.loads(path.read_text(encoding="utf-8")).get("usage", {}).values():
            paid += usage.get("paid_cost_usd") or 0.0
            estimated += usage.get("estimated_cost_usd") or 0.0
    return paid, estimated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=16, choices=range(1, len(MODELS) + 1))
    parser.add_argument("--triggers", type=int, default=624)
    parser.add_argument("--delay", type=float, default=60.0,
                        help="seconds from a batch's creation to its last line done")
    parser.add_argument("--poll", type=float, default=1.0, help="the sweep file's batch_poll")
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "DELAY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), float(args.serve[1]))
        return
    work = Path(tempfile.mkdtemp(prefix="proactflow-batch-bench-"))
    env = dict(child_env(work / "prefect-home"), **{KEY_VARIABLE: KEY})
    corpus = work / "corpus.jsonl"
    build_corpus(corpus, args.triggers)
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), str(args.delay)],
                              env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/stats", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        empty_wall = empty_flow_wall(env)
        config = work / "sweep.toml"
        sweep_file(config, url, work / "store", corpus, args.models, args.poll)
        calls = 2 * args.triggers * args.models
        sweep = timed_sweep(config, env, work / "sweep-output.txt")
        wall, cpu, sampler = sweep.wall, sweep.cpu, sweep.sampler
        stats = json.loads(urllib.request.urlopen(f"{url}/stats").read())
    finally:
        server.terminate()
        server.wait()
    ideal = 2 * args.delay + empty_wall
    print(f"batched sweep: {args.models} Anthropic models x {args.triggers} triggers, judge "
          f"{JUDGE}; {calls:,} calls; batches finish {args.delay:g} s after creation")
    print(f"lines submitted {stats['lines']:,} (expected {calls:,}) in {stats['batches']} "
          f"batches; requests submitted twice: {submitted_twice(stats['submitted'])}; "
          f"interactive calls: {stats['interactive']}")
    print(f"wall {wall:.1f} s; ideal 2 x delay + B = {ideal:.1f} s; beyond it "
          f"{wall - ideal:.1f} s (the last batch was due "
          f"{stats['last_due'] - stats['first_created']:.1f} s after the first was created)")
    print(f"CPU of the sweep's process tree: {cpu:.1f} s, {1000 * cpu / calls:.2f} ms per call; "
          f"{sampler.by_role()}; peak RSS of the tree {sampler.peak:.0f} MB")
    rows = dollars(stats["usage"])
    interactive = sum(row[1] for row in rows)
    batched = sum(row[2] for row in rows)
    for model, by_call, by_batch in rows:
        print(f"  {model:>28}: ${by_batch:8.4f} in batches vs ${by_call:8.4f} interactive")
    print(f"dollars of the tokens answered: ${batched:.4f} in batches vs ${interactive:.4f} "
          f"interactive ({batched / interactive:.0%} of it)" if interactive else
          "no priced tokens answered")
    paid, estimated = recorded_costs(work / "store")
    print(f"the sweep's run records: paid ${paid:.4f} (at batch prices); the interactive "
          f"estimate they record ${estimated:.4f}")

if __name__ == "__main__":
    main()
