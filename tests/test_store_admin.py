"""The store over time: run records listed, shown and removed; gc keeps what kept runs need."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta, timezone

import polars as pl
import pyarrow as pa
import pytest

from helpers import cli_args, run_cli
from replay import SAMPLE_CORPUS, SAMPLE_RESULTS

from proactflow.cache.artifacts import ArtifactSpec, ArtifactStore
from proactflow.results.upkeep.gc import parse_age, plan_collection
from proactflow.run.run_records import record_name

TWO_DAYS = 2 * 86400


def age_files(folder, seconds: float) -> None:
    """Make every file under `folder` look written `seconds` ago."""
    then = time.time() - seconds
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def parquet_files(store) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (store / "artifacts").glob("*/*.parquet"):
        found.setdefault(path.parent.name, set()).add(path.stem)
    return found


@pytest.mark.usefixtures("prefect_server")
def test_gc_keeps_the_latest_run_and_the_import_and_a_kept_run_still_reports(
        fake, store, tmp_path, capsys):
    for revision in ("night-1", "night-2", "night-3"):
        assert run_cli("run", cli_args(fake, store, extra=(
            "--limit", "2", "--judge-revision", revision))) == 0
    assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store), "--model", "openai/published"]) == 0
    records = sorted((store / "runs").glob("*.json"))
    assert len(records) == 4  # the import leaves a record too
    newest_run = max((json.loads(p.read_text()) for p in records
                      if json.loads(p.read_text())["flow"] == "evaluate"),
                     key=lambda r: r["started"])
    age_files(store / "artifacts", TWO_DAYS)
    before = parquet_files(store)
    capsys.readouterr()

    assert run_cli("gc", ["--store", str(store), "--keep-latest", "1", "--dry-run"]) == 0
    planned = capsys.readouterr().out
    assert "would remove 2 run records and 4 artifacts (2 judgments, 2 phase_scores)" in planned
    assert ", 0 kB;" not in planned
    assert parquet_files(store) == before and len(list((store / "runs").glob("*"))) == 4

    assert run_cli("gc", ["--store", str(store), "--keep-latest", "1"]) == 0
    removed = capsys.readouterr().out
    assert removed.splitlines()[-1].replace("removed", "would remove") == \
        planned.splitlines()[-1]  # the size freed too, not 0 for files already gone
    after = parquet_files(store)
    for stage, key in newest_run["artifacts"].items():
        assert key in after[stage], stage  # everything the kept run names
    assert len(after["judgments"]) == 2  # the kept run's and the import's
    assert after["triggers"] == before["triggers"]  # shared inputs stay
    assert run_cli("runs", ["ls", "--store", str(store)]) == 0
    listing = capsys.readouterr().out
    assert "artifacts gone" not in listing, listing
    assert len(listing.splitlines()) == 3  # a header, the kept run and the import
    out = tmp_path / "report"
    assert run_cli("report", ["--store", str(store), "--out", str(out)]) == 0
    board = pl.read_csv(out / "leaderboard.csv").filter(pl.col("phase") == "OVERALL")
    assert sorted(board["source"].to_list()) == ["import", "run"]

    # The removed nights' verdicts are still in the call cache: asking again costs nothing.
    fake.reset_counts()
    assert run_cli("run", cli_args(fake, store, extra=(
        "--limit", "2", "--judge-revision", "night-1"))) == 0
    assert sum(fake.calls.values()) == 0


def put(store: ArtifactStore, stage: str, inputs: dict[str, str], tag: str) -> str:
    spec = ArtifactSpec(stage, 1, inputs, {"tag": tag})
    store.put(spec, pa.table({"x": [1]}))
    return spec.key


def record(store: ArtifactStore, started: datetime, model: str, artifacts: dict[str, str]):
    run_id = f"{model}-{started:%j%H}".ljust(8, "0")
    store.write_json(record_name(started, run_id), {
        "run_id": run_id, "flow": "evaluate", "started": started.isoformat(),
        "complete": True, "model_under_test": {"model": model}, "judge": {"model": "j"},
        "artifacts": artifacts})


def test_gc_rules_latest_and_age_together_inputs_followed_and_recent_files_kept(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    now = datetime(2026, 11, 25, tzinfo=timezone.utc)
    triggers = put(store, "triggers", {}, "corpus")
    keys = {}
    for day in (1, 5, 10, 40, 50):  # model a: five nights, days ago
        responses = put(store, "responses", {"triggers": triggers}, f"a{day}")
        judgments = put(store, "judgments", {"responses": responses}, f"a{day}")
        keys[day] = (responses, judgments)
        record(store, now - timedelta(days=day), "a", {"triggers": triggers,
                                                      "judgments": judgments})
    old_b = put(store, "judgments", {"responses": keys[50][0]}, "b")  # b judged a's night 50
    record(store, now - timedelta(days=60), "b", {"judgments": old_b})
    orphan = put(store, "judgments", {"responses": keys[40][0]}, "crashed run, no record")
    age_files(store.root, 90 * 86400)
    reused = put(store, "judgments", {"responses": keys[50][0]}, "in use by a run going now")
    (store.root / "artifacts" / "judgments" / ".half.parquet.1.tmp").write_bytes(b"x")

    plan = plan_collection(store, keep_latest=2, older_than=timedelta(days=30), now=now)
    removed = {r.started for r in plan.removed_runs}
    # Beyond the newest 2 of series a AND older than 30 days: days 40 and 50; b is its
    # series' newest, so it stays although 60 days old.
    assert removed == {now - timedelta(days=40), now - timedelta(days=50)}
    gone = {p.stem for p in plan.removed_artifacts}
    assert keys[40][1] in gone and keys[50][1] in gone and orphan in gone
    assert keys[40][0] in gone  # night 40's responses: nothing kept needs them
    assert keys[50][0] not in gone  # kept b's judgments were made from night 50's responses
    assert reused not in gone and triggers not in gone
    assert not plan.leftovers  # a write in progress is never taken

    only_age = plan_collection(store, keep_latest=None, older_than=timedelta(days=30), now=now)
    assert len(only_age.removed_runs) == 3  # b goes too
    only_latest = plan_collection(store, keep_latest=1, older_than=None, now=now)
    assert len(only_latest.removed_runs) == 4


def test_runs_show_rm_and_one_line_errors(tmp_path, capsys):
    store = ArtifactStore(tmp_path / "store")
    now = datetime.now(timezone.utc)
    record(store, now - timedelta(days=1), "first", {})
    record(store, now, "second", {})
    root = str(store.root)
    assert run_cli("runs", ["show", "second", "--store", root]) == 0
    assert json.loads(capsys.readouterr().out)["model_under_test"]["model"] == "second"
    assert run_cli("runs", ["rm", "zzz", "--store", root]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert run_cli("runs", ["rm", "first", "second-missing", "--store", root]) == 2
    assert len(list((store.root / "runs").glob("*.json"))) == 2  # all found, or none removed
    assert run_cli("runs", ["rm", "first", "--store", root]) == 0
    left = list((store.root / "runs").glob("*.json"))
    assert len(left) == 1 and json.loads(left[0].read_text())["model_under_test"]["model"] \
        == "second"
    assert run_cli("gc", ["--store", root]) == 2
    assert "needs --keep-latest" in capsys.readouterr().err
    with pytest.raises(ValueError):
        parse_age("3 days")
    assert parse_age("2w") == timedelta(days=14)
