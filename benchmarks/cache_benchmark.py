"""Dollars as billed with the provider's prompt cache (issue #39): a ProactBench sweep of M
models and one judge against fakes that bill like a provider with a prompt cache, in two
styles, four ways each. Run by hand:

    .venv/bin/python benchmarks/cache_benchmark.py                      # 16 models, both styles
    .venv/bin/python benchmarks/cache_benchmark.py --models 4 --triggers 60 --styles anthropic

The styles (tests/fake_billing.py): `openai`, models named as priced OpenAI models of
litellm's map, against an OpenAI-compatible fake that caches every prompt by itself (1,024
tokens at least, blocks of 128); `anthropic`, models named as priced Anthropic models
(`anthropic/...`), against a fake of Anthropic's Messages and Message Batches API that caches
only up to the `cache_control` breakpoints a request carries (1,024 tokens at least, 2,048 for
Haiku models). Both: a prefix is cached once its call is answered, for 300 s from its last
use; a batch's lines are served in order, each reading what was answered before it.

The ways: interactive with `prompt_cache = "off"` (today's order: every trigger at once, no
hint), interactive with `"auto"` (a dialogue's triggers in waves, the judge's first call on its
template first, breakpoints or a cache key), `batch = true` with `"off"`, and with `"auto"`.
Each is a fresh sweep against a fresh fake (an empty cache), run in a process of its own so
that nothing in the benchmark's process can keep it from answering. For each it prints what the
sweep's run records say it paid (cached prompt tokens at the cache prices, at batch prices in
batches) beside the list price (every prompt token at the input price), and the share of the
style's interactive bill without hint; then what the batch bill with the cache is made of.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported
ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests"))
from batch_benchmark import PRICED, JUDGE, judge, own_replies  # noqa: E402
from batch_benchmark_anthropic import MODELS as ANTHROPIC_MODELS  # noqa: E402
from run_benchmark import build_corpus, child_env  # noqa: E402

from fake_billing import BillingFake  # noqa: E402
from fake_billing_anthropic import AnthropicBillingFake  # noqa: E402
from replay import SHARED_JUDGE_PROMPT  # noqa: E402

ANTHROPIC_JUDGE = "claude-sonnet-4-5"
"""A Sonnet judge (the judge prompt, about 1,050 tokens, is below a Haiku model's minimum)."""
ANTHROPIC_KEY = "sk-ant-bench"
WAYS = (("interactive, today's order, no hint", "off", False),
        ("interactive, prompt cache used", "auto", False),
        ("batch, no hint", "off", True),
        ("batch, prompt cache used", "auto", True))


@dataclass
class Style:
    name: str
    models: list[str]
    """As the sweep file names them."""
    judge: str

    def fake(self, latency: float, delay: float):
        served = [name.removeprefix("anthropic/") for name in self.models]
        responders = {name: own_replies(name) for name in set(served)}
        responders[self.judge.removeprefix("anthropic/")] = judge
        if self.name == "anthropic":
            return AnthropicBillingFake(responders, api_key=ANTHROPIC_KEY, latency=latency,
                                        completion_delay=delay)
        return BillingFake(responders, latency=latency, completion_delay=delay)


def styles(models: int) -> dict[str, Style]:
    return {"openai": Style("openai", [PRICED[i % len(PRICED)] for i in range(models)], JUDGE),
            "anthropic": Style("anthropic", [f"anthropic/{ANTHROPIC_MODELS[i % len(ANTHROPIC_MODELS)]}"
                                             for i in range(models)],
                               f"anthropic/{ANTHROPIC_JUDGE}")}


def sweep_file(path: Path, url: str, store: Path, corpus: Path, style: Style,
               prompt_cache: str, batch: bool) -> None:
    def entry(table: str, model: str, extra: str = "") -> str:
        return (f'\n[[{table}]]\nmodel = "{model}"\napi_base = "{url}"\n'
                f'api_key_env = "BENCH_KEY"\n{extra}')

    entries = "".join(entry("models", name, f'revision = "bench-{index}"\n')
                      for index, name in enumerate(style.models))
    path.write_text(f"""store = "{store}"
corpus = "{corpus}"
judge_prompt = "{SHARED_JUDGE_PROMPT}"
prompt_cache = "{prompt_cache}"
concurrency = 32
batch = {str(batch).lower()}
batch_poll = 1
{entry("judges", style.judge)}{entries}""", encoding="utf-8")


def bills(store: Path) -> dict[str, float]:
    """Dollars of a sweep's runs from their records: paid (as billed) and at list price; and
    what the bill is made of, per role."""
    from proactflow.providers.billing import Tokens, billed_cost

    totals: dict[str, float] = {}

    def add(name: str, dollars: float | str | None) -> None:
        totals[name] = totals.get(name, 0.0) + (dollars if isinstance(dollars, float) else 0.0)

    for path in (store / "runs").glob("*.json"):
        for role, used in json.loads(path.read_text())["usage"].items():
            batch = used.get("paid_at") == "batch prices"
            tokens = Tokens(used["paid_prompt_tokens"], used["paid_completion_tokens"],
                            used.get("paid_cache_read_tokens", 0),
                            used.get("paid_cache_write_tokens", 0))
            model = used["model"]
            add("billed", used["paid_cost_usd"])
            add("list", used["paid_list_cost_usd"])
            read, written = tokens.cache_read, tokens.cache_write
            add(f"{role} uncached", billed_cost(
                model, Tokens(tokens.prompt - read - written), batch=batch))
            add(f"{role} read", billed_cost(model, Tokens(read, 0, read), batch=batch))
            add(f"{role} written", billed_cost(model, Tokens(written, 0, 0, written),
                                               batch=batch))
            add(f"{role} completion", billed_cost(model, Tokens(0, tokens.completion),
                                                  batch=batch))
    return totals


COUNTERS = ("prompt", "cached", "written", "ideal_cached")


def serve(style: Style, latency: float, delay: float, counters: Path) -> None:
    """The fake of one sweep, in this process (started by `run_sweep`): says its address on
    stdout, serves until SIGTERM, then writes its cache's counters to `counters`."""
    fake: Any = style.fake(latency, delay).start()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    print(fake.url, flush=True)
    while not stopping.wait(1.0):
        pass
    fake.stop()
    counters.write_text(json.dumps({name: dict(getattr(fake.cache, name))
                                    for name in COUNTERS}), encoding="utf-8")


def run_sweep(work: Path, style: Style, corpus: Path, prompt_cache: str, batch: bool,
              latency: float, delay: float) -> tuple[dict[str, float], dict[str, int], float]:
    """(bills, the fake's cache counters summed over models, wall) of one sweep."""
    label = f"{style.name}-{prompt_cache}-{'batch' if batch else 'interactive'}"
    store, counters = work / f"store-{label}", work / f"cache-{label}.json"
    fake = subprocess.Popen([sys.executable, __file__, "--serve", style.name, str(len(
        style.models)), str(latency), str(delay), str(counters)], stdout=subprocess.PIPE,
        text=True)
    try:
        assert fake.stdout is not None
        url = fake.stdout.readline().strip()
        if not url:
            raise SystemExit(f"the {style.name} billing fake did not start")
        config = work / f"sweep-{label}.toml"
        sweep_file(config, url, store, corpus, style, prompt_cache, batch)
        key = ANTHROPIC_KEY if style.name == "anthropic" else "sk-bench"
        env = dict(child_env(work / "prefect-home"), BENCH_KEY=key)
        started = time.monotonic()
        result = subprocess.run([str(Path(sys.executable).parent / "proactflow"), "sweep",
                                 "--config", str(config)], env=env, capture_output=True,
                                text=True)
        wall = time.monotonic() - started
        (work / f"sweep-{label}.txt").write_text(result.stdout + result.stderr,
                                                 encoding="utf-8")
        if result.returncode != 0:
            raise SystemExit(f"sweep {label} failed:\n{(result.stdout + result.stderr)[-3000:]}")
    finally:
        fake.send_signal(signal.SIGTERM)
        fake.wait()
    found = json.loads(counters.read_text(encoding="utf-8"))
    return bills(store), {name: sum(found[name].values()) for name in COUNTERS}, wall


def report(style: Style, found: dict[str, dict[str, float]]) -> None:
    today, printed = found[WAYS[0][0]]["billed"], found[WAYS[0][0]]["list"]
    print(f"| {style.name}: how | billed | list price | of the interactive bill without hint "
          "| of the interactive list price |")
    print("|---|---|---|---|---|")
    for label, _, _ in WAYS:
        billed, listed = found[label]["billed"], found[label]["list"]
        print(f"| {label} | ${billed:.2f} | ${listed:.2f} | {100 * billed / today:.0f} % "
              f"| {100 * billed / printed:.0f} % |")
    last = found[WAYS[-1][0]]
    print(f"{style.name}: the batch bill with the cache, ${last['billed']:.2f}, is made of:")
    for role in ("model_under_test", "judge"):
        print(f"  {role.replace('_', ' ')}: uncached prompt tokens "
              f"${last.get(role + ' uncached', 0):.2f}, cache reads "
              f"${last.get(role + ' read', 0):.2f}, cache writes "
              f"${last.get(role + ' written', 0):.2f}, completions "
              f"${last.get(role + ' completion', 0):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=16)
    parser.add_argument("--triggers", type=int, default=120)
    parser.add_argument("--latency", type=float, default=0.3,
                        help="seconds the fake takes per call (calls overlap, as at a provider)")
    parser.add_argument("--styles", default="openai,anthropic",
                        help="the providers' billing styles to run, of openai and anthropic")
    parser.add_argument("--delay", type=float, default=5.0,
                        help="seconds from a batch's creation until its lines are answered")
    parser.add_argument("--serve", nargs=5, help=argparse.SUPPRESS,
                        metavar=("STYLE", "MODELS", "LATENCY", "DELAY", "COUNTERS"))
    args = parser.parse_args()
    if args.serve:
        name, models, latency, delay, counters = args.serve
        serve(styles(int(models))[name], float(latency), float(delay), Path(counters))
        return
    chosen = [name.strip() for name in args.styles.split(",") if name.strip()]
    known = styles(args.models)
    if not chosen or any(name not in known for name in chosen):
        parser.error(f"--styles: a comma-separated list of {', '.join(known)}")
    work = Path(tempfile.mkdtemp(prefix="proactflow-cache-bench-"))
    corpus = work / "corpus.jsonl"
    build_corpus(corpus, args.triggers)
    print(f"sweep: {args.models} models x {args.triggers} triggers; interactive calls take "
          f"{args.latency:g} s, batches {args.delay:g} s; prefixes cached from 1,024 tokens "
          "(2,048 for Haiku models) for 300 s from their last use")
    for name in chosen:
        style = known[name]
        print(f"{name}: models {', '.join(sorted(set(style.models)))}; judge {style.judge}")
        found: dict[str, dict[str, float]] = {}
        for label, prompt_cache, batch in WAYS:
            found[label], cache, wall = run_sweep(work, style, corpus, prompt_cache, batch,
                                                  args.latency, args.delay)
            prompt, cached, written, ideal = (cache[name] for name in COUNTERS)
            print(f"{name}, {label}: wall {wall:.1f} s; {prompt:,} prompt tokens, "
                  f"{cached:,} read from the cache ({cached / max(1, prompt):.0%}), "
                  + (f"{written:,} written; " if name == "anthropic" else "")
                  + f"an ideal order reads {ideal:,} "
                  f"({cached / max(1, ideal):.0%} of it)")
        report(style, found)
    print(f"the sweeps' outputs: {work}")


if __name__ == "__main__":
    main()
