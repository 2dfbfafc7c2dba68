"""Dollars as billed with the provider's prompt cache (issue #39): a ProactBench sweep of M
models and one judge against a fake that bills like a provider with a prefix cache
(tests/fake_billing.py: 1,024 tokens at least, blocks of 128, a time to live, a prefix cached
once its call is answered), run twice: `prompt_cache = "off"` (today's order: every trigger at
once, no hint) and `"auto"` (a dialogue's triggers in waves, the judge's first call on its
template first). Run by hand:

    .venv/bin/python benchmarks/cache_benchmark.py                      # 16 models
    .venv/bin/python benchmarks/cache_benchmark.py --models 4 --triggers 60

The models are named as priced models of litellm's map, so that dollars come from it. For
each run it prints the dollars as billed (cached prompt tokens at the cache read price) beside
the list price (every prompt token at the input price), and the same calls at batch prices:
without cache reads, and with the cache reads the interactive run got (the fake's batches do
not model a cache: that line assumes a batch gets the hits its ordered interactive run got).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests"))
from batch_benchmark import PRICED, JUDGE, judge, own_replies  # noqa: E402
from run_benchmark import build_corpus, child_env  # noqa: E402

from fake_billing import BillingFake  # noqa: E402
from replay import SHARED_JUDGE_PROMPT  # noqa: E402


def sweep_file(path: Path, url: str, store: Path, corpus: Path, models: list[str],
               prompt_cache: str) -> None:
    entries = "".join(f'\n[[models]]\nmodel = "{name}"\napi_base = "{url}"\n'
                      f'api_key_env = "BENCH_KEY"\nrevision = "bench-{index}"\n'
                      for index, name in enumerate(models))
    path.write_text(f"""store = "{store}"
corpus = "{corpus}"
judge_prompt = "{SHARED_JUDGE_PROMPT}"
prompt_cache = "{prompt_cache}"
concurrency = 32

[[judges]]
model = "{JUDGE}"
api_base = "{url}"
api_key_env = "BENCH_KEY"
{entries}""", encoding="utf-8")


def bills(store: Path) -> dict[str, float]:
    """Dollars of a sweep's runs from their records: as billed and at list price, interactive
    and in batches."""
    from proactflow.providers.billing import Tokens, billed_cost, list_cost

    totals = dict.fromkeys(("billed", "list", "batch", "batch_cached", "batch_list"), 0.0)
    for path in (store / "runs").glob("*.json"):
        for used in json.loads(path.read_text())["usage"].values():
            tokens = Tokens(used["paid_prompt_tokens"], used["paid_completion_tokens"],
                            used.get("paid_cache_read_tokens", 0),
                            used.get("paid_cache_write_tokens", 0))
            model = used["model"]
            totals["billed"] += billed_cost(model, tokens) or 0.0
            totals["list"] += list_cost(model, tokens) or 0.0
            totals["batch_cached"] += billed_cost(model, tokens, batch=True) or 0.0
            totals["batch_list"] += list_cost(model, tokens, batch=True) or 0.0
    return totals


def run_sweep(work: Path, names: list[str], corpus: Path, prompt_cache: str,
              latency: float) -> tuple[dict[str, float], BillingFake, float]:
    responders = {name: own_replies(name) for name in set(names)}
    responders[JUDGE] = judge
    fake = BillingFake(responders, latency=latency, ttl=300.0).start()
    store = work / f"store-{prompt_cache}"
    try:
        config = work / f"sweep-{prompt_cache}.toml"
        sweep_file(config, fake.url, store, corpus, names, prompt_cache)
        env = dict(child_env(work / "prefect-home"), BENCH_KEY="sk-bench")
        started = time.monotonic()
        result = subprocess.run([str(Path(sys.executable).parent / "proactflow"), "sweep",
                                 "--config", str(config)], env=env, capture_output=True,
                                text=True)
        wall = time.monotonic() - started
        (work / f"sweep-{prompt_cache}.txt").write_text(result.stdout + result.stderr,
                                                        encoding="utf-8")
        if result.returncode != 0:
            raise SystemExit(f"sweep failed:\n{(result.stdout + result.stderr)[-3000:]}")
    finally:
        fake.stop()
    return bills(store), fake, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=16)
    parser.add_argument("--triggers", type=int, default=120)
    parser.add_argument("--latency", type=float, default=0.3,
                        help="seconds the fake takes per call (calls overlap, as at a provider)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="proactflow-cache-bench-"))
    corpus = work / "corpus.jsonl"
    build_corpus(corpus, args.triggers)
    names = [PRICED[i % len(PRICED)] for i in range(args.models)]
    print(f"sweep: {args.models} models x {args.triggers} triggers, judged by {JUDGE}; the "
          f"fake answers in {args.latency:g} s and caches prefixes of 1,024+ tokens in blocks "
          "of 128 for 300 s")
    found = {}
    for mode in ("off", "auto"):
        totals, fake, wall = run_sweep(work, names, corpus, mode, args.latency)
        found[mode] = totals
        prompt, cached, ideal = (sum(c.values()) for c in (fake.prompt, fake.cached,
                                                            fake.ideal_cached))
        print(f"prompt_cache = {mode}: wall {wall:.1f} s; {prompt:,} prompt tokens, "
              f"{cached:,} read from the cache ({cached / prompt:.0%}); an ideal order "
              f"reads {ideal:,} ({cached / max(1, ideal):.0%} of it)")
    today = found["off"]["billed"]
    rows = [("interactive, today's order, no hint", found["off"]["billed"],
             found["off"]["list"]),
            ("interactive, prompt cache used", found["auto"]["billed"], found["auto"]["list"]),
            ("batch, no cache read", found["off"]["batch_list"], found["off"]["batch_list"]),
            ("batch, prompt cache used (the interactive run's hits)",
             found["auto"]["batch_cached"], found["auto"]["batch_list"])]
    print("| how | billed | list price | of today's interactive bill |")
    print("|---|---|---|---|")
    for label, billed, listed in rows:
        print(f"| {label} | ${billed:.2f} | ${listed:.2f} | {100 * billed / today:.0f} % |")
    print(f"the sweeps' outputs: {work}")


if __name__ == "__main__":
    main()
