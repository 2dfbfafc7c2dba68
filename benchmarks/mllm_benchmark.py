"""Speed, CPU and memory of a full-size multimodal ProactiveBench run (MCQA) against a fake
endpoint with a fixed latency per call.

Run by hand from the repository root (not part of the tests):

    .venv/bin/python benchmarks/mllm_benchmark.py                    # 7,557 samples, 1 s a call
    .venv/bin/python benchmarks/mllm_benchmark.py --samples 500      # a quick look first

It generates a corpus in the package's layout with the tests' generator (tests/mllm_corpus.py)
at the real set's size (the FILTER's counts per dataset, 7,557 entries; the generator marks a third
of VSOD's as weak occlusions, which the loader skips: 7,543 samples) with every image drawn
at 500x375, a synthetic wheel whose FILTER keeps them, and
starts the fake OpenAI-compatible server: its model answers a letter chosen by a hash of the
request, so episodes run as far as the datasets allow (actions continue, categories end). Then
`proactflow run --suite proactivebench-mllm` runs as a user would, in a subprocess with its own
temporary Prefect server. Figures: wall time against the latency-bound ideal (the calls' total
latency spread over --concurrency, or the longest episode if longer), the child's CPU per call,
its peak memory; then the same command again, answered from the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import mllm_corpus  # noqa: E402
from fake_openai import FakeOpenAI, Reply  # noqa: E402
from mllm_suite_helpers import synthetic_wheel  # noqa: E402
from measure import measured  # noqa: E402

REAL_COUNTS = {"ROD": 88, "VSOD": 42, "MVP-N": 2591, "IN-C": 1095, "QD": 2105, "CIT": 396,
               "COCO": 1240}
"""The package's FILTER sizes: 7,557 samples (shared README, data_utils.py:8)."""
SIZE = (500, 375)
RUNNER = """
import hashlib, sys
sys.path.insert(0, {tests!r})
from proactflow.suites import register_suite
from proactflow.suites.proactivebench_mllm.suite import ProactiveBenchMllm
from proactflow.cli import main
wheel = {wheel!r}
register_suite(ProactiveBenchMllm(hashlib.sha256(open(wheel, "rb").read()).hexdigest()))
sys.exit(main(sys.argv[1:]))
"""


def counts(samples: int) -> dict[str, int]:
    """The real counts, scaled down proportionally (at least one each) for a quick look."""
    total = sum(REAL_COUNTS.values())
    return {short: max(1, round(n * samples / total)) if samples < total else n
            for short, n in REAL_COUNTS.items()}


def _unique(png: bytes, marker: int) -> bytes:
    """The same pixels, other bytes: a tEXt chunk before IEND (a request's key holds its
    image's hash, so two files alike would be one call)."""
    data = b"proactflow\0" + str(marker).encode()
    chunk = len(data).to_bytes(4, "big") + b"tEXt" + data + \
        zlib.crc32(b"tEXt" + data).to_bytes(4, "big")
    return png[:-12] + chunk + png[-12:]


def build(root: Path, samples: int) -> tuple[Path, Path, int]:
    """(corpus, wheel, images written): every image 500x375, drawn from a pool of 64 (drawing
    and encoding ~30,000 images would take longer than the run), each file's bytes unique."""
    drawn = [0]
    original = mllm_corpus.draw
    pool: list[bytes] = []
    for index in range(64):
        original(root / "pool" / f"{index}.png", random.Random(index), SIZE)
        pool.append((root / "pool" / f"{index}.png").read_bytes())

    def full_size(path: Path, rng, size=None) -> None:
        drawn[0] += 1
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_unique(pool[rng.randrange(len(pool))], drawn[0]))

    mllm_corpus.draw = full_size
    chosen = counts(samples)
    corpus = root / "corpus"
    mllm_corpus.generate_corpus(corpus, per_dataset=max(chosen.values()),
                                ids={short: range(n) for short, n in chosen.items()})
    mllm_corpus.draw = original
    wheel = synthetic_wheel(root / "proactivebench.whl", range(max(chosen.values())))
    return corpus, wheel, drawn[0]


def letter_by_hash(request: dict) -> Reply:
    text = request["messages"][0]["content"][1]["text"]
    lines = [ln for ln in text.splitlines() if len(ln) > 2 and ln[1] == "." and ln[0].isupper()]
    digest = hashlib.sha256(json.dumps(request["messages"]).encode()[-4096:]).digest()
    return Reply(content=lines[digest[0] % len(lines)][0] if lines else "A")


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds and peak RSS (MB) of the child, and its output's tail; exit
    code 1 too (crashes or errors counted apart)."""
    run = measured(command, env, codes=(0, 1))
    return run.wall_s, run.cpu_s, run.peak_rss_mb, run.output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=sum(REAL_COUNTS.values()))
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per fake call")
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mllm-bench-") as folder:
        root = Path(folder)
        started = time.monotonic()
        corpus, wheel, images = build(root, args.samples)
        print(f"corpus: {images} images of {SIZE[0]}x{SIZE[1]} in "
              f"{time.monotonic() - started:.0f} s", flush=True)
        env = dict(os.environ, PREFECT_HOME=str(root / "prefect"),
                   PREFECT_SERVER_ANALYTICS_ENABLED="false", LITELLM_LOCAL_MODEL_COST_MAP="True",
                   PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120")
        env.pop("PREFECT_API_URL", None)
        runner = RUNNER.format(tests=str(ROOT / "tests"), wheel=str(wheel))
        with FakeOpenAI({"model": letter_by_hash}, latency=args.latency) as fake:
            command = [sys.executable, "-c", runner, "run", "--suite", "proactivebench-mllm",
                       "--eval-vision",
                       "--corpus", str(corpus), "--package", str(wheel),
                       "--eval-model", "openai/model", "--eval-api-base", fake.url,
                       "--concurrency", str(args.concurrency), "--store", str(root / "store"),
                       "--out", str(root / "out")]
            wall, cpu, rss, _ = timed(command, env)
            calls = fake.calls["model"]
            fake.reset_counts()
            cached_wall, cached_cpu, cached_rss, _ = timed(command, env)
            cached_calls = fake.calls["model"]
        steps = json.loads((root / "out" / "metrics.json").read_text())["metrics"]
        import polars as pl
        per_sample = pl.read_csv(root / "out" / "samples.csv")
        longest = int(pl.read_csv(root / "out" / "steps.csv").group_by(
            "dataset", "sample_id").len()["len"].max() or 0)
    ideal = max(calls * args.latency / args.concurrency, longest * args.latency)
    print(json.dumps({
        "samples": per_sample.height, "calls": calls, "longest_episode_steps": longest,
        "latency_s": args.latency, "concurrency": args.concurrency,
        "wall_s": round(wall, 1), "latency_bound_ideal_s": round(ideal, 1),
        "wall_over_ideal": round(wall / ideal, 3),
        # The cached run makes no call: its wall time is the fixed cost of a run (imports, the
        # temporary Prefect server, the flow, the exports), paid once whatever the size.
        "wall_less_fixed_cost_over_ideal": round((wall - cached_wall) / ideal, 3),
        "cpu_s": round(cpu, 1), "cpu_ms_per_call": round(1000 * cpu / max(calls, 1), 2),
        "peak_rss_mb": round(rss), "cached_run": {
            "calls": cached_calls, "wall_s": round(cached_wall, 1), "cpu_s": round(cached_cpu, 1),
            "peak_rss_mb": round(cached_rss)},
        "metrics": steps}, indent=2))


if __name__ == "__main__":
    main()
