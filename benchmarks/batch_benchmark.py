"""The nightly sweep of sweep_benchmark.py in batch mode (issue #29): M models x 624 triggers and
one judge, `batch = true`, against the fake OpenAI files and batches API (tests/fake_batches.py)
whose batches complete a set delay after they are created. Run by hand:

    .venv/bin/python benchmarks/batch_benchmark.py                  # 16 models, 30 s per batch
    .venv/bin/python benchmarks/batch_benchmark.py --models 4 --delay 10

The models are named as priced models of litellm's map (gpt-4o-mini, gpt-4.1-nano, ...), served
by the fake, so that dollars come from the price map. It prints, measured in this one run: the
sweep's wall time against the rounds of batches times the fake's delay, the batches and lines
sent (and any request sent twice), CPU seconds per call of the sweep's process tree (the fake
runs in this process and is not counted), and the dollars paid at batch prices against the same
tokens at interactive prices.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests"))
from run_benchmark import build_corpus, child_env  # noqa: E402

from fake_batches import FakeBatches, Reply  # noqa: E402
from replay import JUDGE_PROMPT, synthetic_judge, synthetic_model  # noqa: E402

PRICED = ("gpt-4o-mini", "gpt-4.1-nano", "gpt-4.1-mini", "gpt-4o", "gpt-4.1", "o4-mini",
          "o3-mini", "gpt-5-mini", "gpt-5-nano", "gpt-5")
"""Models with batch prices in litellm's map, named by the sweep's entries (cycled)."""
JUDGE = "gpt-4.1"


def own_replies(name: str):
    """Replies of this model of its own, so that each model's judging is its own."""
    return lambda request: Reply(content=f"{name}: {synthetic_model(request).content}")


def judge(request: dict) -> Reply:
    """The tests' synthetic judge; a request it cannot read is a verdict without evidence."""
    try:
        return synthetic_judge(request)
    except ValueError:
        return Reply(content=json.dumps({"evaluation_result": {
            "status": "EVALUATED", "score": "FAIL", "rationale": "unread", "evidence": ""}}))


def sweep_file(path: Path, url: str, store: Path, corpus: Path, models: list[str],
               delay: float) -> None:
    entries = "".join(f'\n[[models]]\nmodel = "{name}"\napi_base = "{url}"\n'
                      f'api_key_env = "BENCH_KEY"\nrevision = "bench-{index}"\n'
                      for index, name in enumerate(models))
    path.write_text(f"""store = "{store}"
corpus = "{corpus}"
judge_prompt = "{JUDGE_PROMPT}"
batch = true
batch_poll = {max(0.5, delay / 10):g}

[[judges]]
model = "{JUDGE}"
api_base = "{url}"
api_key_env = "BENCH_KEY"
{entries}""", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=16)
    parser.add_argument("--triggers", type=int, default=624)
    parser.add_argument("--delay", type=float, default=30.0,
                        help="seconds from a batch's creation to its completion at the fake")
    args = parser.parse_args()
    from proactflow.batches.pricing import batch_cost  # first: litellm's local price map

    import litellm

    work = Path(tempfile.mkdtemp(prefix="proactflow-batch-bench-"))
    env = dict(child_env(work / "prefect-home"), BENCH_KEY="sk-bench")
    corpus = work / "corpus.jsonl"
    build_corpus(corpus, args.triggers)
    # Models cycle through PRICED; a revision label keeps two entries of one name apart.
    names = [PRICED[i % len(PRICED)] for i in range(args.models)]
    responders = {name: own_replies(name) for name in set(names)}
    responders[JUDGE] = judge
    fake = FakeBatches(responders, completion_delay=args.delay).start()
    try:
        config = work / "sweep.toml"
        sweep_file(config, fake.url, work / "store", corpus, names, args.delay)
        before = os.times()
        started = time.monotonic()
        result = subprocess.run([str(Path(sys.executable).parent / "proactflow"), "sweep",
                                 "--config", str(config)], env=env, capture_output=True,
                                text=True)
        wall = time.monotonic() - started
        after = os.times()
        (work / "sweep-output.txt").write_text(result.stdout + result.stderr, encoding="utf-8")
        if result.returncode != 0:
            raise SystemExit(f"sweep failed:\n{(result.stdout + result.stderr)[-3000:]}")
    finally:
        fake.stop()
    cpu = (after.children_user - before.children_user
           + after.children_system - before.children_system)
    lines = sum(fake.lines_submitted.values())
    print(f"sweep: {args.models} models x {args.triggers} triggers, judged by {JUDGE}, batches "
          f"completing {args.delay:g} s after their creation")
    print(f"batches created: {len(fake.batch_sizes)} (largest {max(fake.batch_sizes)} lines); "
          f"lines sent: {lines:,}; requests sent twice: {len(fake.twice)}; interactive calls: "
          f"{sum(fake.calls.values())}")
    # One round of generation, then the judge's first call alone (its format learnt), then the
    # rest of the judging: three batch delays one after the other at least.
    floor = 3 * args.delay
    print(f"wall {wall:.1f} s; three rounds of batches one after the other take {floor:.0f} s "
          f"at the fake: {wall - floor:.1f} s beyond the fake's completion delay")
    print(f"CPU of the sweep's process tree: {cpu:.1f} s, {1000 * cpu / lines:.2f} ms per call")
    batch_dollars = interactive_dollars = 0.0
    for path in (work / "store" / "runs").glob("*.json"):
        usage = json.loads(path.read_text())["usage"]
        for used in usage.values():
            prompt, completion = used["paid_prompt_tokens"], used["paid_completion_tokens"]
            interactive = litellm.cost_per_token(model=used["model"], prompt_tokens=prompt,
                                                 completion_tokens=completion)
            interactive_dollars += sum(interactive)
            batch_dollars += batch_cost(used["model"], prompt, completion) or 0.0
    print(f"paid at batch prices ${batch_dollars:.4f}; the same tokens interactive "
          f"${interactive_dollars:.4f} ({100 * batch_dollars / interactive_dollars:.0f} %)")
    print(f"requests the fake's responders could not read: {len(fake.responder_errors)}")
    print(f"the sweep's output: {work / 'sweep-output.txt'}")


if __name__ == "__main__":
    main()
