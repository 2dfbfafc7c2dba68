"""Size and speed of the history at full scale: 16 (model, judge) pairs a night over 30 nights,
for ProactBench (624 triggers in 198 dialogues) and the multimodal ProactiveBench (7,557
samples, its largest suite), made-up verdicts (one night in ten worse).

Run by hand from the repository root (not part of the tests):

    .venv/bin/python benchmarks/history_size.py [--all-change]

Each night, 4 of the 16 pairs are new evaluations (a new checkpoint) and the others are the
night before's (the cache answered: the same judgments); with --all-change every pair of every
night is new (the worst case). It prints the bytes of one night's file, the seconds to record
the 30 nights as a sweep does (each night's figures and intervals computed then), and the
seconds `proactflow history` spends reading them, comparing consecutive nights (paired
bootstrap where a figure moved) and writing history.csv and history.html. Last, what the 30th
night's sweep reads of its series (its plan's and its snapshot check's latest snapshots, then
its findings once recorded): newest first and only back to what it compares with, against the
whole series read each of those three times (as before).
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from proactflow.cache.artifacts import ArtifactStore
from proactflow.results.history.nights import (latest_snapshots, newest_nights, read_nights,
                                        samples_record, write_night)
from proactflow.results.history.page import write_history
from proactflow.results.history.scores import (all_findings, findings_of, history_table,
                                               night_findings, pair_scores)
from proactflow.suites import get_suite

PAIRS, NIGHTS = 16, 30
DATASETS = ["ROD", "VSOD", "MVP-N", "IN-C", "QD", "CIT", "COCO"]


def proactbench_samples(draw: random.Random, worse: bool) -> pl.DataFrame:
    rows = [(f"d{t % 198}|{t}|0", f"d{t % 198}", ["CRITICAL", "EMERGENT", "RECOVERY"][t % 3])
            for t in range(624)]
    verdicts = [draw.choice(["FAIL", "FAIL", "PARTIAL"] if worse else ["PASS", "PARTIAL", "FAIL"])
                for _ in rows]
    credit = {"PASS": 1.0, "PARTIAL": 0.5, "FAIL": 0.0}
    return pl.DataFrame({"sample": [r[0] for r in rows], "unit": [r[1] for r in rows],
                         "group": [r[2] for r in rows], "verdict": verdicts,
                         "value": [credit[v] for v in verdicts], "count": [1.0] * len(rows)})


def mllm_samples(draw: random.Random, worse: bool) -> pl.DataFrame:
    names = [f"{DATASETS[i % 7]}|{i}|0" for i in range(7557)]
    right = [draw.random() < (0.3 if worse else 0.6) for _ in names]
    return pl.DataFrame({"sample": names, "unit": names,
                         "group": [DATASETS[i % 7] for i in range(len(names))],
                         "verdict": ["correct" if r else "wrong (wrong)" for r in right],
                         "value": [float(r) for r in right], "count": [1.0] * len(names)})


def measure(suite: str, make, every_pair_changes: bool) -> None:
    draw = random.Random(0)
    with tempfile.TemporaryDirectory() as folder:
        store = ArtifactStore(Path(folder) / "store")
        start = time.perf_counter()
        first = datetime(2026, 11, 1, 2, tzinfo=timezone.utc)
        pairs: list[dict] = []
        for night in range(NIGHTS):
            new = [p for p in range(PAIRS) if every_pair_changes or night == 0
                   or p % 4 == night % 4]
            pairs = [pairs[p] if p not in new else {
                "model": f"m{p}", "judge": "j", "revision": f"r{night}", "variant": "",
                "judgments": f"k{night}-{p}", "responses": "",
                "snapshot": {"served_model": f"m{p}-snap", "system_fingerprint": None},
                "judge_snapshot": {"served_model": "j-snap", "system_fingerprint": None},
                "notes": [], "metric": "-",
                "samples": samples_record(make(draw, night % 10 == 9))} for p in range(PAIRS)]
            pairs = [{**pair, "scores": pair.get("scores") or pair_scores(suite, pair)}
                     for pair in pairs]
            where = write_night(store, "nightly", suite, first + timedelta(days=night),
                                f"run{night:05d}", pairs, {"report": None, "viewer": None})
        recorded = time.perf_counter() - start
        size = Path(where).stat().st_size
        start = time.perf_counter()
        nights = read_nights(store)
        table = history_table(nights)
        findings = all_findings(nights)
        write_history(Path(folder) / "out", table, findings)
        read = time.perf_counter() - start
        sweep_reads = sweep_seconds(store, suite)
    print(f"{get_suite(suite).display_name}: one night of {PAIRS} pairs {size / 1e6:.2f} MB; "
          f"{NIGHTS} nights recorded in {recorded:.1f} s; history of them (read, {table.height} "
          f"figures with intervals, {len(findings)} findings, page) in {read:.1f} s; the last "
          f"night's sweep reads its series in {sweep_reads[0]:.2f} s (the whole series three "
          f"times: {sweep_reads[1]:.2f} s)")


def sweep_seconds(store: ArtifactStore, suite: str) -> tuple[float, float]:
    """Seconds the last night's sweep spends reading its series: as it does now, and reading
    the whole series for each of its three looks."""
    wanted = [("model", f"m{p}") for p in range(PAIRS)] + [("judge", "j")]
    last = f"run{NIGHTS - 1:05d}"
    start = time.perf_counter()
    for _ in range(2):  # the plan's line, then the snapshot check
        latest_snapshots(newest_nights(store, series="nightly", suite=suite), wanted)
    night_findings(newest_nights(store, series="nightly", suite=suite), last, 0.0)
    now = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(2):
        latest_snapshots(reversed(read_nights(store, series="nightly", suite=suite)), wanted)
    nights = read_nights(store, series="nightly", suite=suite)
    findings_of(nights, len(nights) - 1, 0.0)
    return now, time.perf_counter() - start


if __name__ == "__main__":
    every = "--all-change" in sys.argv
    print(f"{PAIRS} pairs x {NIGHTS} nights, "
          + ("every pair new every night" if every else "4 new pairs a night"))
    measure("proactbench", proactbench_samples, every)
    measure("proactivebench-mllm", mllm_samples, every)
