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
not model a cache: that line assumes a batch gets the hits its ordered interactive run got);
what that batch bill is made of per role (prompt tokens no cache served, cache reads,
completions), and what an ideal order (every prefix sent before a call read by it) would save
beyond it.
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
    and in batches; and what the batch bill with the cache is made of, per role."""
    from proactflow.providers.billing import Tokens, billed_cost, list_cost

    totals: dict[str, float] = {}

    def add(name: str, dollars: float | None) -> None:
        totals[name] = totals.get(name, 0.0) + (dollars or 0.0)

    for path in (store / "runs").glob("*.json"):
        for role, used in json.loads(path.read_text())["usage"].items():
            tokens = Tokens(used["paid_prompt_tokens"], used["paid_completion_tokens"],
                            used.get("paid_cache_read_tokens", 0),
                            used.get("paid_cache_write_tokens", 0))
            model = used["model"]
            add("billed", billed_cost(model, tokens))
            add("list", list_cost(model, tokens))
            add("batch_cached", billed_cost(model, tokens, batch=True))
            add("batch_list", list_cost(model, tokens, batch=True))
            read = tokens.cache_read
            add(f"{role} uncached", billed_cost(model, Tokens(tokens.prompt - read), batch=True))
            add(f"{role} read", billed_cost(model, Tokens(read, 0, read), batch=True))
            add(f"{role} completion", billed_cost(model, Tokens(0, tokens.completion),
                                                  batch=True))
    return totals


def unread_by_order(fake: BillingFake) -> float:
    """Dollars at batch prices of the prompt tokens an ideal order reads from the cache and
    this order did not: what a better order could still save."""
    from proactflow.providers.billing import Tokens, billed_cost

    total = 0.0
    for model, ideal in fake.ideal_cached.items():
        missed = max(0, ideal - fake.cached[model])
        full = billed_cost(model, Tokens(missed), batch=True) or 0.0
        total += full - (billed_cost(model, Tokens(missed, 0, missed), batch=True) or 0.0)
    return total


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
    found, unread = {}, {}
    for mode in ("off", "auto"):
        totals, fake, wall = run_sweep(work, names, corpus, mode, args.latency)
        found[mode] = totals
        unread[mode] = unread_by_order(fake)
        prompt, cached, ideal = (sum(c.values()) for c in (fake.prompt, fake.cached,
                                                            fake.ideal_cached))
        print(f"prompt_cache = {mode}: wall {wall:.1f} s; {prompt:,} prompt tokens, "
              f"{cached:,} read from the cache ({cached / prompt:.0%}); an ideal order "
              f"reads {ideal:,} ({cached / max(1, ideal):.0%} of it)")
    today = found["off"]["billed"]
    auto = found["auto"]
    print(f"the batch bill with the cache, ${auto['batch_cached']:.2f}, is made of:")
    for role in ("model_under_test", "judge"):
        print(f"  {role.replace('_', ' ')}: uncached prompt tokens "
              f"${auto[role + ' uncached']:.2f}, cache reads ${auto[role + ' read']:.2f}, "
              f"completions ${auto[role + ' completion']:.2f}")
    missed = unread["auto"]
    print(f"an ideal order would save ${missed:.2f} more: at best "
          f"${auto['batch_cached'] - missed:.2f}, "
          f"{100 * (auto['batch_cached'] - missed) / today:.0f} % of today's interactive bill")
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
