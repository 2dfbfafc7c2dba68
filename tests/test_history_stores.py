"""The series lives where the store is: nights a sweep on one host writes to an S3 store (a real
SeaweedFS on loopback) are read by `proactflow history` on another host, a separate process
with its own local state that shares nothing with the first but the bucket."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import polars as pl

from proactflow.cache.artifacts import ArtifactStore
from test_history_suites import TRACES, record_nights, verdicts
import warm_spawn

AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN")


def test_nights_written_on_one_host_are_read_on_another(seaweed, tmp_path, monkeypatch):
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in seaweed.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PROACTFLOW_STATE_DIR", str(tmp_path / "host-a"))
    location = f"s3://{seaweed.bucket}/history-{uuid.uuid4().hex[:8]}"
    good = verdicts([(True, True), (False, True), (True, True), (False, False)])
    bad = verdicts([(True, False), (False, True), (True, True), (False, False)])
    written = record_nights(ArtifactStore(location), "proactiveagent", [good, good, bad],
                            "openai/reward")
    assert all(night.location.startswith(location + "/history/nightly/") for night in written)

    out = tmp_path / "host-b-history"
    env = {**os.environ, "PROACTFLOW_STATE_DIR": str(tmp_path / "host-b")}
    done = warm_spawn.run([sys.executable, "-m", "proactflow.cli", "history", "--store",
                           location, "--suite", "proactiveagent", "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "REGRESSION: openai/m judged by openai/reward (proactiveagent, demo_all): F1" in \
        done.stdout
    assert "2026-11-03 02:00  proactiveagent  ckpt-3 (openai/m) judged by openai/reward: F1 " \
           "demo_all " in done.stdout  # the split holding every trace: the widest group
    table = pl.read_csv(out / "history.csv")
    assert table["night"].str.slice(0, 10).unique().sort().to_list() == [
        "2026-11-01", "2026-11-02", "2026-11-03"]
    assert set(table["group"]) == {"demo_all", "even", "odd"}
    changed = f"{TRACES[1]}|0|0: proposed, accepted → proposed, rejected"
    assert changed in (out / "history.html").read_text(encoding="utf-8")
    assert not list((tmp_path / "host-b").glob("**/history/**/*.json"))  # read, not copied
