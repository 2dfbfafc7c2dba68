"""The store on both backends, a local folder and S3 (a real SeaweedFS server on loopback, no
mock): one winner among racing writers, incomplete then complete outputs, refresh versions,
records and inputs, the store commands, one-line errors, and no credential anywhere."""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import re
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from fake_openai import Reply
from helpers import cli_args, run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, SAMPLE_RESULTS

from proactflow.cache.artifacts import ArtifactSpec, ArtifactStore, storage_for
from proactflow.cache.keys import text_sha256
from proactflow.cache.remote import open_filesystem
from proactflow.results.upkeep.gc import collect, plan_collection
from proactflow.run.run_records import find_record, read_records, record_name
from proactflow.suites.sources import fetch_upstream_judge_prompt
import warm_spawn

WRITERS = 16
AWS_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_SESSION_TOKEN")


@pytest.fixture(params=["dir", "s3"])
def location(request, tmp_path, monkeypatch) -> str:
    """A fresh store on each backend: a folder, or a prefix of its own in the test bucket
    (credentials and endpoint in the AWS_* variables only)."""
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PROACTFLOW_STATE_DIR", str(tmp_path / "state"))
    if request.param == "dir":
        return str(tmp_path / "store")
    server = request.getfixturevalue("seaweed")
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)
    return f"s3://{server.bucket}/{re.sub(r'[^a-z0-9]+', '-', request.node.name.lower())}-" \
           f"{uuid.uuid4().hex[:8]}"


def raw_bytes(location: str) -> bytes:
    """A stored file's bytes, read without the store's own code."""
    if "://" not in location:
        return Path(location).read_bytes()
    fs, path = open_filesystem(location)
    return fs.cat_file(path)


RACE = ArtifactSpec("judgments", 1, {"responses": "r" * 64}, {"race": True})


def _race(location: str, writer: int, barrier, results, environment: dict[str, str]) -> None:
    os.environ.update(environment)  # a forkserver's child has the server's, not the test's
    try:
        table = pa.table({"writer": [writer] * 500,
                          "text": [f"the verdict of writer {writer}"] * 500})
        store = ArtifactStore(location)
        barrier.wait(timeout=60)
        # The primitive alone first: all create one name at once, with no look beforehand.
        created = storage_for(location).create("race/raw", f"writer {writer}".encode())
        barrier.wait(timeout=60)
        artifact = store.put(RACE, table)
        read = artifact.frame()["writer"].unique().to_list()
        results.put((writer, artifact.name, hashlib.sha256(raw_bytes(artifact.location))
                     .hexdigest(), read, created))
    except BaseException as exc:  # reported by the parent, which fails the test
        results.put((writer, "error", repr(exc), [], False))


def test_sixteen_racing_writers_leave_one_artifact_and_all_read_its_bytes(location):
    # forkserver, not fork: a fork of a process running threads (polars, Prefect's test server)
    # can inherit a lock held mid-operation and hang. The server is a fresh process that has
    # imported the writers' modules once, so each writer starts without paying for them again.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["polars", "pyarrow", "proactflow.cache.artifacts",
                                    "proactflow.cache.remote", "s3fs", "test_object_store"])
    environment = {name: value for name, value in os.environ.items()
                   if name.startswith(("AWS_", "PROACTFLOW_"))}
    barrier, results = context.Barrier(WRITERS), context.Queue()
    workers = [context.Process(target=_race, args=(location, n, barrier, results, environment))
               for n in range(WRITERS)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert not [o for o in outcomes if o[1] == "error"], outcomes
    created = [writer for writer, *_, made in outcomes if made]
    assert len(created) == 1  # one create succeeded, fifteen were refused
    assert storage_for(location).read("race/raw") == f"writer {created[0]}".encode()
    assert len({name for _, name, *_ in outcomes}) == 1
    assert len({digest for _, _, digest, *_ in outcomes}) == 1  # identical bytes for all
    winners = [writer for writer, _, _, read, _ in outcomes if read == [writer]]
    assert len(winners) == 1  # everyone reads the winner's rows, and nobody else's
    stored = ArtifactStore(location).stored_key(RACE.stage, RACE.key)
    assert list(stored.versions) == [1] and stored.incomplete is None
    if "://" not in location:  # every temporary file went away
        assert sorted(p.name for p in Path(location).rglob("*") if p.is_file()) == \
            [f"{RACE.key}.parquet", "raw"]


def frame_of(value: int) -> pa.Table:
    return pl.DataFrame({"x": [value, value]}).to_arrow()


def test_incomplete_then_complete_then_refreshed(location):
    store = ArtifactStore(location)
    spec = ArtifactSpec("responses", 1, {"triggers": "t" * 64}, {"model": "m"})
    assert store.get(spec) is None
    first = store.put(spec, frame_of(1), complete=False)
    assert (first.complete, first.version) == (False, 0)
    assert store.put(spec, frame_of(2), complete=False).name == first.name  # replaced
    found = store.get(spec)
    assert found is not None and not found.complete and found.frame()["x"][0] == 2
    assert found.material()["inputs"] == {"triggers": "t" * 64}

    done = store.put(spec, frame_of(3))
    assert (done.complete, done.version) == (True, 1)
    assert done.name == f"artifacts/responses/{spec.key}.parquet"  # the layout of old
    stored_bytes = raw_bytes(done.location)
    late = store.put(spec, frame_of(4))  # a slower writer of the same output keeps the first
    assert late == done and raw_bytes(done.location) == stored_bytes
    assert store.put(spec, frame_of(5), complete=False) == done  # never shadows a complete one
    assert store.get(spec).frame()["x"][0] == 3

    refreshing = ArtifactStore(location, refreshing={"responses"})
    again = refreshing.put(spec, frame_of(6))
    assert (again.version, again.complete) == (2, True)
    assert store.get(spec).frame()["x"][0] == 6 and raw_bytes(done.location) == stored_bytes
    partly = refreshing.put(spec, frame_of(7), complete=False)  # a refresh whose calls failed
    assert store.get(spec) == partly  # is recomputed by the next run
    assert store.put(spec, frame_of(8)).version == 3
    assert store.get_by_key("responses", spec.key).frame()["x"][0] == 8
    stored = store.stored_key("responses", spec.key)
    assert sorted(stored.versions) == [1, 2, 3] and stored.incomplete is not None


def test_records_and_inputs_round_trip(location):
    store = ArtifactStore(location)
    started = datetime(2026, 11, 25, 2, 0, tzinfo=timezone.utc)
    content = {"run_id": "0123456789abcdef", "flow": "evaluate", "started": started.isoformat(),
               "complete": True, "model_under_test": {"model": "m"}, "judge": {"model": "j"},
               "artifacts": {}, "text": "é ✓ 日本語"}
    where = store.write_json(record_name(started, content["run_id"]), content)
    assert where.startswith(location)
    records = read_records(store)
    assert [r.content for r in records] == [content]
    assert records[0].name == "20261125T020000Z-01234567"
    assert find_record(records, "0123", store).location == where
    store.remove_record(records[0].name)
    assert read_records(store) == []

    prompt = JUDGE_PROMPT.read_text(encoding="utf-8")
    assert store.read_input("judge_prompt/abc.txt") is None
    store.write_input("judge_prompt/abc.txt", prompt.encode("utf-8"))
    assert store.read_input("judge_prompt/abc.txt") == prompt.encode("utf-8")
    # The upstream prompt cached in the store is used without any network.
    cached = fetch_upstream_judge_prompt(store, commit="abc", expected_sha256=text_sha256(prompt))
    assert cached.text == prompt


def synthetic(store: ArtifactStore, tag: str, started: datetime) -> dict[str, str]:
    """A night of model `a`: empty artifacts (the report skips them) and its run record."""
    empty = pa.table({"x": pa.array([], pa.int64())})
    keys = {}
    inputs: dict[str, str] = {}
    for stage in ("triggers", "responses", "judgments"):
        spec = ArtifactSpec(stage, 1, inputs, {"night": tag})
        store.put(spec, empty)
        keys[stage] = spec.key
        inputs = {stage: spec.key}
    run_id = f"night{tag}".ljust(16, "0")  # no hex digit run id starts so
    store.write_json(record_name(started, run_id), {
        "run_id": run_id, "flow": "evaluate", "started": started.isoformat(), "complete": True,
        "model_under_test": {"model": "a"}, "judge": {"model": "j"}, "artifacts": keys})
    return keys


def store_commands(location: str, tmp_path: Path, capsys) -> None:
    """import, report, runs ls/show/rm and gc, as a user runs them, on one store."""
    store = ArtifactStore(location)
    assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                              "--store", location, "--model", "openai/published"]) == 0
    now = datetime.now(timezone.utc)
    old = synthetic(store, "1", now - timedelta(days=10))
    new = synthetic(store, "2", now - timedelta(days=5))
    capsys.readouterr()
    assert run_cli("report", ["--store", location, "--out", str(tmp_path / "report")]) == 0
    board = pl.read_csv(tmp_path / "report" / "leaderboard.csv")
    assert board["model"].unique().to_list() == ["openai/published"]
    capsys.readouterr()
    assert run_cli("runs", ["ls", "--store", location]) == 0
    listing = capsys.readouterr().out
    assert len(listing.splitlines()) == 4 and "artifacts gone" not in listing
    assert run_cli("gc", ["--store", location, "--keep-latest", "1", "--dry-run"]) == 0
    assert "would remove 1 run records and 0 artifacts" in capsys.readouterr().out
    assert len(read_records(store)) == 3
    assert run_cli("gc", ["--store", location, "--keep-latest", "1"]) == 0
    assert "removed 1 run records and 0 artifacts" in capsys.readouterr().out  # recent: kept
    assert len(read_records(store)) == 2

    # Two days on, night 1's artifacts are past the grace period and no record needs them.
    plan = plan_collection(store, keep_latest=1, older_than=None,
                           now=now + timedelta(days=2))
    assert {p.stem for p in plan.removed_artifacts} == set(old.values()) - set(new.values())
    collect(store, plan)
    assert {found.key for found in store.inventory()[0]}.isdisjoint(old.values())
    assert run_cli("runs", ["ls", "--store", location]) == 0
    assert "artifacts gone" not in capsys.readouterr().out
    assert run_cli("runs", ["rm", "night2", "--store", location]) == 0
    assert run_cli("runs", ["show", "night2", "--store", location]) == 2
    assert [r.flow for r in read_records(store)] == ["import"]


def test_store_commands_on_both_backends(location, tmp_path, capsys):
    store_commands(location, tmp_path, capsys)


# Every library logs at DEBUG here (what is checked for a secret): the store commands on S3
# then take minutes on a loaded machine.
@pytest.mark.timeout(900)
def test_no_credential_in_anything_written_or_logged(seaweed, tmp_path, monkeypatch, capsys,
                                                    caplog):
    for name in AWS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in seaweed.environment().items():
        monkeypatch.setenv(name, value)
    state = tmp_path / "state"
    monkeypatch.setenv("PROACTFLOW_STATE_DIR", str(state))
    caplog.set_level(logging.DEBUG)  # every library's debug log too
    location = f"s3://{seaweed.bucket}/credentials-{uuid.uuid4().hex[:8]}"
    store_commands(location, tmp_path, capsys)
    store = ArtifactStore(location)
    state.mkdir(exist_ok=True)
    store.local_dir("calls").mkdir(parents=True, exist_ok=True)

    fs, base = open_filesystem(location)
    written = {path: fs.cat_file(path) for path in fs.find(base)}
    assert any(path.endswith(".parquet") for path in written) and \
        any("/runs/" in path for path in written)
    written.update({str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()})
    shown = capsys.readouterr()
    for secret in (seaweed.access_key_id, seaweed.secret_access_key):
        for path, data in written.items():
            assert secret.encode() not in data, path
        assert secret not in shown.out + shown.err
        assert secret not in caplog.text
        assert all(secret not in json.dumps(r.content) for r in read_records(store))


def cli(args: list[str], environment: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return warm_spawn.run([sys.executable, "-m", "proactflow.cli", *args],
                          env={**base, **environment}, capture_output=True, text=True,
                          timeout=120)


def test_unknown_bucket_refused_credentials_and_secrets_in_the_url_are_one_line(seaweed):
    good = seaweed.environment()
    cases = {
        "bucket nope-": (f"s3://nope-{uuid.uuid4().hex[:6]}/x", good, "does not exist"),
        "refused": (f"s3://{seaweed.bucket}/x",
                    {**good, "AWS_SECRET_ACCESS_KEY": "not-the-secret-" + "x" * 20},
                    "refused the credentials"),
        "none": (f"s3://{seaweed.bucket}/x",
                 {"AWS_ENDPOINT_URL": good["AWS_ENDPOINT_URL"], "AWS_REGION": "us-east-1",
                  "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/none"},
                 "no credentials"),
        "in the URL": (f"s3://{good['AWS_ACCESS_KEY_ID']}:{good['AWS_SECRET_ACCESS_KEY']}@"
                       f"{seaweed.bucket}/x", good, "without credentials"),
    }
    for case, (url, environment, expected) in cases.items():
        done = cli(["runs", "ls", "--store", url], environment)
        assert done.returncode == 2, (case, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and expected in done.stderr, (case, done.stderr)
        if case != "in the URL":  # (argparse prints its usage line first)
            assert done.stderr.count("\n") == 1, done.stderr
        for secret in (good["AWS_ACCESS_KEY_ID"], good["AWS_SECRET_ACCESS_KEY"]):
            assert secret not in done.stderr + done.stdout, case


@pytest.mark.usefixtures("prefect_server")
def test_a_refresh_is_a_new_version_that_later_runs_read(fake, store, tmp_path):
    """--refresh cannot overwrite a complete artifact: it writes the key's next version (and
    of the stages computed from it), which the next run reuses without a call."""
    args = cli_args(fake, store, eval_model="openai/synth", judge_model="openai/judge2",
                    extra=("--limit", "2"))
    assert run_cli("run", args) == 0
    artifacts = ArtifactStore(store)
    first = read_records(artifacts)[-1].artifacts
    before = {stage: raw_bytes(artifacts.get_by_key(stage, key).location)
              for stage, key in first.items()}
    fake.responders["synth"] = lambda request: Reply(content="A refreshed plan.")
    assert run_cli("run", [*args, "--refresh", "responses"]) == 0
    assert read_records(artifacts)[-1].artifacts == first  # the same keys
    for stage, key in first.items():
        current = artifacts.get_by_key(stage, key)
        refreshed = stage in ("responses", "judgments", "phase_scores")
        assert current.version == (2 if refreshed else 1), stage
        assert raw_bytes(str(store / f"artifacts/{stage}/{key}.parquet")) == before[stage]
    answered = artifacts.get_by_key("responses", first["responses"]).frame()
    assert set(answered.filter(pl.col("status") == "ok")["response"]) == {"A refreshed plan."}
    fake.reset_counts()
    assert run_cli("run", [*args, "--out", str(tmp_path / "out")]) == 0
    assert sum(fake.calls.values()) == 0  # the refreshed answers are what is reused
    scored = pl.read_csv(tmp_path / "out" / "phase_scores.csv", null_values="-")
    assert scored.equals(artifacts.get_by_key("phase_scores", first["phase_scores"]).frame()
                         .select(scored.columns).cast(scored.schema))


@pytest.mark.parametrize("version", [1, 2])
def test_an_unreadable_artifact_is_moved_aside_on_both_backends(location, version, caplog):
    """A truncated Parquet file (of the first version, or of a refresh's) is moved to
    quarantine/ with one warning line naming it; its key then reads as absent (the run builds
    it again) and a new output of it is stored whole."""
    store = ArtifactStore(location, refreshing=["judgments"] if version > 1 else [])
    spec = ArtifactSpec("judgments", 1, {}, {"tag": "damaged"})
    for _ in range(version):
        written = store.put(spec, pa.table({"x": [1, 2, 3]}))
    assert written.version == version
    storage = storage_for(location)
    whole = storage.read(written.name)
    storage.replace(written.name, whole[: len(whole) // 2])
    with caplog.at_level(logging.WARNING, logger="proactflow.store"):
        found = store.get(spec)
    lines = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(lines) == 1 and storage.location(written.name) in lines[0]
    assert "Parquet magic bytes not found in footer" in lines[0] and "\n" not in lines[0]
    moved = storage.files("quarantine")
    assert [entry.name.split("/", 2)[2] for entry in moved] == [written.name]
    assert raw_bytes(storage.location(moved[0].name)) == whole[: len(whole) // 2]
    if version == 1:
        assert found is None
    else:  # the version before it is whole: served until the stage is built again
        assert found is not None and found.version == 1
    again = ArtifactStore(location, refreshing=["judgments"]).put(spec, pa.table({"x": [4]}))
    assert again.frame()["x"].to_list() == [4]
