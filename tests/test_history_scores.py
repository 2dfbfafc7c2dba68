"""The history's arithmetic on recorded nights, without sweeps: paired intervals, the threshold,
a judge that changed, and gc keeping what the nights name."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from helpers import run_cli
from proactflow.cache.artifacts import ArtifactSpec, ArtifactStore
from proactflow.results.history.nights import (latest_snapshots, newest_nights, read_nights,
                                               write_night)
from proactflow.results.history.scores import (all_findings, findings_of, history_table,
                                               night_findings)
from proactflow.results.upkeep.gc import plan_collection

UNITS = [f"d{i}" for i in range(12)]


def pair(verdicts: list[str | None], *, judge_fingerprint: str = "j-1",
         judgments: str = "", revision: str = "r1") -> dict:
    """One (model, judge) of a night: three samples per unit, in phases A and B."""
    samples = [f"{unit}|{turn}|0" for unit in UNITS for turn in range(3)]
    return {"model": "m", "judge": "j", "revision": revision, "judgments": judgments,
            "responses": "", "snapshot": {"served_model": "m-snap",
                                          "system_fingerprint": "f"},
            "judge_snapshot": {"served_model": "j-snap",
                               "system_fingerprint": judge_fingerprint},
            "notes": [], "samples": {
                "sample": samples, "unit": [s.split("|")[0] for s in samples],
                "group": ["A" if s.endswith("|0|0") else "B" for s in samples],
                "verdict": verdicts}}


def record(store: ArtifactStore, day: int, entry: dict, threshold: float = 0.0) -> None:
    write_night(store, "nightly", "proactbench", datetime(2026, 11, day, 2, tzinfo=timezone.utc),
                f"run{day:05d}", [entry], {"report": None, "viewer": None},
                {"regression_threshold": threshold})


def test_a_change_is_a_finding_only_when_its_paired_interval_excludes_zero(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    good = ["PASS", "PARTIAL", "FAIL"] * len(UNITS)
    record(store, 1, pair(good))
    # Night 2: one sample in one unit flips: a real but tiny change, within the noise.
    one_flip = list(good)
    one_flip[0] = "FAIL"
    record(store, 2, pair(one_flip))
    # Night 3: the PARTIALs of every unit become FAIL; one sample unscored (not paired).
    worse = ["PASS", "FAIL", "FAIL"] * len(UNITS)
    worse[1] = None
    record(store, 3, pair(worse))
    nights = read_nights(store)
    findings = all_findings(nights)
    assert {(f.after[:10], f.group) for f in findings} == {("2026-11-03", "B"),
                                                           ("2026-11-03", "OVERALL")}
    overall = next(f for f in findings if f.group == "OVERALL")
    assert overall.kind == "regression"
    assert overall.samples == 3 * len(UNITS) - 1  # the unscored sample is not compared
    # Against night 2: eleven PARTIAL -> FAIL, and night 2's flipped sample back to PASS.
    assert overall.delta == pytest.approx((-0.5 * (len(UNITS) - 1) + 1) / overall.samples)
    assert overall.ci_low <= overall.delta <= overall.ci_high < 0
    assert {c["sample"] for c in overall.changed} == \
        {f"{u}|1|0" for u in UNITS[1:]} | {"d0|0|0"}
    # The same nights read again give the same intervals (a seeded draw in a fixed order).
    again = all_findings(read_nights(store))
    assert [(f.ci_low, f.ci_high) for f in again] == [(f.ci_low, f.ci_high) for f in findings]
    # Above the threshold only: -12.9 points is not a finding at 13 points.
    assert not [f for f in all_findings(nights, threshold=0.13) if f.group == "OVERALL"]
    assert [f for f in all_findings(nights, threshold=0.12) if f.group == "OVERALL"]


def test_a_judge_that_changed_is_a_break_not_a_regression(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    record(store, 1, pair(["PASS"] * 36))
    record(store, 2, pair(["FAIL"] * 36, judge_fingerprint="j-2"))
    record(store, 3, pair(["PASS"] * 36, judge_fingerprint="j-2"))
    nights = read_nights(store)
    findings = all_findings(nights)
    assert [(f.after[:10], f.kind) for f in findings if f.group == "OVERALL"] == [
        ("2026-11-03", "improvement")]  # night 2 against 1 is across the break
    table = history_table(nights).filter(group="OVERALL").sort("night")
    assert table["judge_changed"].to_list() == [False, True, False]
    assert table["judge_snapshot"].to_list() == ["j-snap (j-1)", "j-snap (j-2)",
                                                 "j-snap (j-2)"]


def test_gc_keeps_what_the_history_names_unless_told_otherwise(tmp_path, capsys):
    store = ArtifactStore(tmp_path / "store")
    spec = ArtifactSpec("judgments", 1, {}, {"tag": "night 1"})
    store.put(spec, pa.table({"x": [1]}))
    record(store, 1, pair(["PASS"] * 36, judgments=spec.key))
    then = time.time() - 3 * 86400
    for path in (tmp_path / "store" / "artifacts").rglob("*"):
        os.utime(path, (then, then))
    now = datetime.now(timezone.utc)
    kept = plan_collection(store, keep_latest=1, older_than=timedelta(days=1), now=now)
    assert not kept.removed_artifacts
    forgot = plan_collection(store, keep_latest=1, older_than=timedelta(days=1), now=now,
                             keep_history=False)
    assert [p.stem for p in forgot.removed_artifacts] == [spec.key]
    assert run_cli("gc", ["--store", str(tmp_path / "store"), "--keep-latest", "1",
                          "--forget-history"]) == 0
    assert "removed 0 run records and 1 artifacts" in capsys.readouterr().out
    assert len(read_nights(store)) == 1  # the history itself stays
    assert run_cli("history", ["--store", str(tmp_path / "store"), "--out",
                               str(tmp_path / "h")]) == 0
    assert "2026-11-01 02:00  proactbench  r1, m-snap (f) (m) judged by j: weighted score " \
           "OVERALL 100.0" in capsys.readouterr().out


def test_history_of_an_empty_store_is_one_line(tmp_path, capsys):
    assert run_cli("history", ["--store", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert "no sweep nights recorded" in err and err.count("\n") == 1


def test_a_sweep_reads_its_series_only_back_to_what_it_compares_with(tmp_path):
    """A sweep's night is compared with the latest earlier night of each of its pairs, and its
    snapshot check wants the latest snapshot of each model: the series is read newest first, and
    only that far back (a year of nights is not read every night), with the findings and
    snapshots the whole series gives."""
    store = ArtifactStore(tmp_path / "store")
    good, worse = ["PASS", "PARTIAL", "FAIL"] * len(UNITS), ["PASS", "FAIL", "FAIL"] * len(UNITS)
    for day in range(1, 9):
        record(store, day, pair(good if day < 8 else worse))
    other = {**pair(good), "model": "other"}  # a second model, last seen on night 2
    write_night(store, "nightly", "proactbench", datetime(2026, 11, 2, 3, tzinfo=timezone.utc),
                "other-02", [other], {"report": None, "viewer": None})

    read: list[str] = []

    def newest():
        for night in newest_nights(store, series="nightly", suite="proactbench"):
            read.append(night.date[:10])
            yield night

    nights = read_nights(store)
    whole = findings_of(nights, len(nights) - 1, 0.0)
    assert whole and night_findings(newest(), "run00008", 0.0) == whole
    assert read == ["2026-11-08", "2026-11-07"]
    read.clear()
    assert latest_snapshots(newest(), [("model", "m"), ("judge", "j")]) == {
        ("model", "m"): (pair(good)["snapshot"], "2026-11-08 02:00"),
        ("judge", "j"): (pair(good)["judge_snapshot"], "2026-11-08 02:00")}
    assert read == ["2026-11-08"]
    read.clear()
    assert latest_snapshots(newest(), [("model", "other")])[("model", "other")][1] == \
        "2026-11-02 03:00"
    assert read == [f"2026-11-0{day}" for day in range(8, 1, -1)]
