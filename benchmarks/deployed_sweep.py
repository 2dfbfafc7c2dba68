"""A deployed sweep on a local cluster under a rate-limited judge: how close to the judge's rate
the two workers together get, and whether the provider ever says 429.

Run by hand from the repository root (not part of the tests):

    .venv/bin/python benchmarks/deployed_sweep.py                      # 4 models x 360 triggers
    .venv/bin/python benchmarks/deployed_sweep.py --models 8 --copies 80 --limit 2400 --rpm 2300

It starts what tests/test_deployed_sweep.py starts (tests/prefect_cluster.py): a real `prefect
server start` on a throw-away PostgreSQL (tests/pg_server.py), which also holds the sweep's
calls and rate limits, `prefect deploy --name evaluate`, two `prefect worker start` processes
("w-gpu" on work queue gpu, "w-cpu" on the default queue, half the models each), and the store
on SeaweedFS S3 (tests/seaweed.py); without PostgreSQL or SeaweedFS, a folder store (the rate
limits then shared through the folder, as on one host). The models and the judge are one fake
OpenAI endpoint on loopback; the judge answers 429 (with a Retry-After) to any request that
arrives when more than `--limit` arrived in the last 60 s, and the sweep file gives it
`rpm = --rpm`. The corpus is the tests' own, `--copies` times over (replay.scaled_corpus: 9
triggers a copy), so every model answers, and the judge is asked, `9 x copies` distinct things.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import seaweed as weed  # noqa: E402
from fake_openai import FakeOpenAI, PerMinuteLimit, Reply  # noqa: E402
from prefect_cluster import evaluate_runs, local_cluster, sweep, sweep_file, worker_of  # noqa: E402
from replay import scaled_corpus, synthetic_judge, synthetic_model  # noqa: E402


def own_answers(name: str):
    return lambda request: Reply(content=f"{name} says: {synthetic_model(request).content}")


def optional_servers(folder: Path):
    """PostgreSQL and SeaweedFS where they start here, else None (said on stdout)."""
    from pg_server import PostgresServer, PostgresUnavailable

    try:
        postgres = PostgresServer().start()
    except PostgresUnavailable as exc:
        print(f"without PostgreSQL: {exc}")
        postgres = None
    try:
        weed_process, s3 = weed.start(folder / "seaweedfs")
    except RuntimeError as exc:
        print(f"without SeaweedFS: {exc}")
        weed_process, s3 = None, None
    return postgres, weed_process, s3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=4, help="models under test")
    parser.add_argument("--copies", type=int, default=40,
                        help="copies of the tests' corpus (9 triggers each)")
    parser.add_argument("--limit", type=int, default=1200,
                        help="the fake judge's requests per sliding minute before 429")
    parser.add_argument("--rpm", type=float, default=1150, help="the judge's rpm in the sweep")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per fake call")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="deployed-sweep-") as tmp:
        folder = Path(tmp)
        postgres, weed_process, s3 = optional_servers(folder)
        models = [f"model{i}" for i in range(args.models)]
        fake = FakeOpenAI({m: own_answers(m) for m in models}, latency=args.latency)
        judge = fake.responders["judge"] = PerMinuteLimit(synthetic_judge, args.limit)
        (folder / "cluster").mkdir()
        try:
            with fake, local_cluster(folder / "cluster", postgres, s3) as cluster:
                corpus, per_model = scaled_corpus(folder, args.copies)
                use_s3 = s3 is not None and cluster["database"] is not None
                store = f"s3://{s3.bucket}/bench" if use_s3 else str(folder / "store")
                rpm = int(args.rpm) if args.rpm == int(args.rpm) else args.rpm
                config = sweep_file(
                    folder / "sweep.toml", fake, cluster, store, models, judge="judge",
                    judge_extra=f"rpm = {rpm}", corpus=corpus, limit=None,
                    queue_of=lambda m: "gpu" if int(m[5:]) % 2 == 0 else None)
                print(f"cluster up: store {'S3' if use_s3 else 'folder'}, database "
                      f"{'PostgreSQL' if cluster['database'] else 'none'}; sweeping "
                      f"{args.models} models x {per_model} triggers")
                clock = time.monotonic()
                done = sweep(cluster, config, folder / "cwd", timeout=3600)
                seconds = time.monotonic() - clock
                if done.returncode != 0:
                    sys.exit(done.stdout[-3000:] + done.stderr[-3000:])
                runs = [r for r in evaluate_runs(cluster["url"])
                        if r["state"]["type"] == "COMPLETED"]
                per_worker = Counter(worker_of(cluster["url"], r) for r in runs)
                waited = max((datetime.fromisoformat(r["start_time"]) -
                              datetime.fromisoformat(r["expected_start_time"])).total_seconds()
                             for r in runs)
                running = max(r["total_run_time"] for r in runs)
        finally:
            if weed_process is not None:
                weed.stop(weed_process)
            if postgres is not None:
                postgres.stop()

    judge_calls = fake.calls["judge"]
    ideal = judge_calls / args.rpm * 60
    print(f"\nsweep wall time            {seconds:8.1f} s")
    print(f"judge's rate-bound ideal   {ideal:8.1f} s  ({judge_calls} calls / {rpm} rpm x 60 s;"
          f" wall / ideal {seconds / ideal:.2f})")
    print(f"longest run                {running:8.1f} s running, {waited:.1f} s waiting to start")
    print(f"calls per model            {', '.join(f'{m} {fake.calls[m]}' for m in models)}")
    print(f"judge calls                {judge_calls} (expected {args.models * per_model})")
    print(f"429s seen                  {judge.refused} (busiest minute {judge.busiest} "
          f"requests, limit {args.limit})")
    print(f"evaluations per worker     {dict(sorted(per_worker.items()))}")


if __name__ == "__main__":
    main()
