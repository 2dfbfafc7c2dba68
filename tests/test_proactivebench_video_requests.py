"""Every request of the video ProactiveBench, byte for byte: small runs through the CLI whose
requests (each model call's JSON body as the fake server received it, hashed) and per-call
cache keys are compared with tests/data/video_requests.json, recorded before the episode's
chat was built incrementally and frames were decoded by skipping what no step shows. A key
holds the endpoint, whose port the fake server draws anew each run: the keys compared are those
of the same key material with the endpoint left out (every key computed, the plan's and the
judge's included), and the steps' keys are compared through them.

A request is the whole chat of its step; the runs play the fixture's four videos with the
default protocol and twice per sample (`--samples 2`), and with two frames a second and a
window of three frames, so that images leave the window in the middle of a step's frames.
The images are FFmpeg's encodings: a different decoder (PyAV or FFmpeg version) may encode
other bytes, so the recorded hashes name the decoder they hold for.

Regenerate (only when a request is meant to change):
    PROACTFLOW_RECORD_VIDEO_REQUESTS=1 .venv/bin/pytest tests/test_proactivebench_video_requests.py
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import polars as pl
import pytest

from fake_openai import FakeOpenAI
from helpers import run_cli
from test_proactivebench_video_suite import args_for, grader, watcher
from video_fixtures import write_corpus

from proactflow.cache.keys import content_key
from proactflow.providers import chat as chat_module
from proactflow.suites import get_suite
from proactflow.suites.proactivebench_video.episode import FrameSets
from proactflow.suites.proactivebench_video.frames import decoder_versions
from proactflow.suites.proactivebench_video.protocol import StreamingSettings

RECORDED = Path(__file__).parent / "data" / "video_requests.json"
RUNS = {
    "default, two samples": (StreamingSettings(), ["--samples", "2"]),
    "2 fps, window of 3": (StreamingSettings(fps=2, frame_window=3), []),
}


def body_sha256(request: dict) -> str:
    body = {name: value for name, value in request.items() if not name.startswith("_")}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def portless_keys(monkeypatch) -> dict[str, str]:
    """Each per-call cache key computed from now on -> the key of its material without the
    endpoint."""
    seen: dict[str, str] = {}

    def recording(material):
        key = content_key(material)
        if isinstance(material, dict) and "api_base" in material:
            seen[key] = content_key({**material, "api_base": "the fake server"})
        return key

    monkeypatch.setattr(chat_module, "content_key", recording)
    return seen


def played(corpus: Path, store: Path, out: Path, extra: list[str], keys: dict[str, str]
           ) -> dict:
    """One run's requests (sorted hashes of each model's bodies), its steps' cache keys, its
    plan's lines and its PAUC table; a second run on the same store must make no call."""
    keys.clear()
    with FakeOpenAI({"watcher": watcher, "grader": grader}) as fake:
        assert run_cli("run", [*args_for(fake, corpus, store), *extra, "--dry-run"]) == 0
        assert run_cli("run", [*args_for(fake, corpus, store), *extra, "--out", str(out)]) == 0
        bodies = {model: sorted(body_sha256(r) for r in fake.requests if r["model"] == model)
                  for model in ("watcher", "grader")}
        fake.reset_counts()
        assert run_cli("run", [*args_for(fake, corpus, store), *extra]) == 0
        assert fake.calls["watcher"] == fake.calls["grader"] == 0
    steps = pl.read_csv(out / "steps.csv").sort("part", "question_id", "sample_index", "step")
    step_keys = [f"{r['part']}/{r['question_id']}/{r['sample_index']}/{r['step']}: "
                 f"{keys[r['request_key']]} {r['frame_times']}"
                 for r in steps.iter_rows(named=True)]
    # The refused count (a column added after the recording, issue #36) is not PAUC: left out.
    metrics = pl.read_csv(out / "metrics.csv", null_values="-").drop("refused", strict=False)
    return {"bodies": bodies, "request_keys": step_keys, "every_key": sorted(set(keys.values())),
            "metrics": [list(row) for row in metrics.rows()]}


def test_every_request_and_key_is_the_recorded_one(tmp_path, capsys, monkeypatch):
    corpus = write_corpus(tmp_path / "corpus")
    suite = get_suite("proactivebench-video")
    found: dict = {"decoder": decoder_versions(), "runs": {}}
    keys = portless_keys(monkeypatch)
    for name, (streaming, extra) in RUNS.items():
        monkeypatch.setattr(suite, "streaming", streaming)
        monkeypatch.setattr(suite, "frame_sets", FrameSets())
        slug = name.replace(" ", "-").replace(",", "")
        run = played(corpus, tmp_path / f"store-{slug}", tmp_path / f"out-{slug}", extra, keys)
        plan = [line.strip() for line in capsys.readouterr().out.splitlines()
                if "calls," in line or "samples," in line or "tokens" in line]
        found["runs"][name] = {**run, "plan": plan}
    if os.environ.get("PROACTFLOW_RECORD_VIDEO_REQUESTS"):
        RECORDED.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n",
                            encoding="utf-8")
    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    if recorded["decoder"] != found["decoder"]:
        pytest.skip(f"the hashes were recorded with {recorded['decoder']}, this is "
                    f"{found['decoder']}: its frames may be encoded to other bytes")
    for name in RUNS:
        mine, theirs = found["runs"][name], recorded["runs"][name]
        assert mine["plan"] == theirs["plan"], name
        assert mine["request_keys"] == theirs["request_keys"], name
        assert mine["every_key"] == theirs["every_key"], name
        assert mine["bodies"] == theirs["bodies"], name
        assert mine["metrics"] == theirs["metrics"], name
