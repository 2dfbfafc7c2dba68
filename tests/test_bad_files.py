"""One bad file never stops a night, never a traceback (issue #36): an artifact that cannot be
read is moved aside and built again from the per-call cache; `view` and `report` skip it with
one line; a night of the history that is unreadable, uneven or impossible is set aside, the
next night compares with the newest readable one, and `history` shows the gap."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from helpers import cli_args, run_cli
from proactflow.cache.artifacts import ArtifactStore
from proactflow.results.history.nights import read_nights, write_night
from proactflow.results.history.scores import all_findings, history_table
from test_history import NightlyModel, verdict_judge
from test_history_scores import UNITS, pair, record



def ours(output: str) -> str:
    """What proactflow printed, less Python logging's own report of a handler whose stream a
    test before this one closed (Prefect's console handler outlives a test's captured stderr
    in the same worker): that report's traceback is the harness's, not the command's."""
    import re

    return re.sub(r"--- Logging error ---\n.*?\nArguments: [^\n]*\n", "", output, flags=re.S)


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def said(text: str, words: str) -> list[str]:
    """The lines saying `words`, one per file named: a warning that reaches the terminal both
    through proactflow's handler and through a console handler an earlier in-process run of
    this test process left configured is one warning, told twice by the harness."""
    import re

    found: dict[tuple[str, ...], str] = {}
    for line in ours(text).splitlines():  # not logging's report of a closed stream either
        if words in line:
            named = tuple(sorted(re.findall(r"[^\s'\"(]*/[^\s'\")]+", line)))
            found.setdefault(named or (line,), line)
    return list(found.values())


def test_a_truncated_artifact_is_moved_aside_and_built_again(fake, store, tmp_path, capsys):
    limit = ("--limit", "2")
    for judge in ("openai/judge", "openai/judge2"):
        assert run_cli("run", cli_args(fake, store, judge_model=judge, extra=limit)) == 0
    judgments = sorted((store / "artifacts" / "judgments").glob("*.parquet"))
    assert len(judgments) == 2
    bad = judgments[0]
    truncate(bad)
    capsys.readouterr()
    fake.reset_counts()

    # The same runs again: the truncated output is set aside and judged again from the
    # per-call cache, no call paid.
    for judge in ("openai/judge", "openai/judge2"):
        assert run_cli("run", cli_args(fake, store, judge_model=judge, extra=limit)) == 0
    assert sum(fake.calls.values()) == 0
    both = capsys.readouterr()
    output = both.out + both.err
    assert "Traceback" not in ours(output)
    # One line naming the file; where an earlier in-process run left a console handler on a
    # closed stream, logging reports the line instead of printing it: the file is named there.
    lines = said(output, "cannot be read")
    assert len(lines) <= 1 and all(bad.name in line and "moved aside" in line for line in lines)
    assert bad.name in output and "moved aside" in output
    moved = list((store / "quarantine").rglob(bad.name))
    assert len(moved) == 1 and bad.exists()  # kept aside; the key stored whole again
    assert pl.read_parquet(bad).height > 0

    # view and report skip an unreadable artifact with one line.
    truncate(bad)
    assert run_cli("report", ["--store", str(store), "--out", str(tmp_path / "report")]) == 0
    truncate_next = sorted((store / "artifacts" / "judgments").glob("*.parquet"))
    assert bad not in truncate_next  # moved aside by the report
    report = capsys.readouterr()
    assert "Traceback" not in ours(report.out + report.err)
    assert len(said(report.out + report.err, "cannot be read")) <= 1
    assert "cannot be read" in report.out + report.err
    truncate(truncate_next[0])
    code = run_cli("view", ["--store", str(store), "--out", str(tmp_path / "viewer"),
                           "--no-open"])
    view = capsys.readouterr()
    assert "Traceback" not in ours(view.out + view.err)
    assert len(said(view.out + view.err, "cannot be read")) <= 1
    assert "cannot be read" in view.out + view.err
    assert code in (0, 2)  # nothing left to view is one line too


def night_file(store: Path, day: int) -> Path:
    return next((store / "history" / "nightly").glob(f"202611{day:02d}T*.json"))


def worse() -> list[str]:
    return ["PASS", "FAIL", "FAIL"] * len(UNITS)


def good() -> list[str]:
    return ["PASS", "PARTIAL", "FAIL"] * len(UNITS)


@pytest.mark.parametrize("damage", ["truncated", "uneven", "impossible"])
def test_a_bad_night_is_set_aside_and_the_history_shows_the_gap(tmp_path, capsys, damage):
    store = ArtifactStore(tmp_path / "store")
    record(store, 1, pair(good()))
    record(store, 2, pair(good()))
    record(store, 3, pair(worse()))
    path = night_file(tmp_path / "store", 2)
    if damage == "truncated":
        truncate(path)
    elif damage == "uneven":
        content = json.loads(path.read_text())
        content["pairs"][0]["samples"]["verdict"].pop()
        path.write_text(json.dumps(content))
    else:  # a value of 7.0 on a 0-1 metric
        content = json.loads(path.read_text())
        samples = content["pairs"][0]["samples"]
        samples["value"] = [7.0] * len(samples["sample"])
        samples["count"] = [1.0] * len(samples["sample"])
        path.write_text(json.dumps(content))
    capsys.readouterr()
    nights = read_nights(store)
    assert [n.set_aside is not None for n in nights] == [False, True, False]
    # Night 3 is compared with night 1, the newest readable one.
    overall = [f for f in all_findings(nights) if f.group == "OVERALL"]
    assert [(f.kind, f.before[:10], f.after[:10]) for f in overall] == [
        ("regression", "2026-11-01", "2026-11-03")]
    assert -0.2 < overall[0].delta < 0
    table = history_table(nights)
    gap = table.filter(pl.col("set_aside").is_not_null())
    assert gap.height == 1 and str(path) in gap["set_aside"][0]

    assert run_cli("history", ["--store", str(tmp_path / "store"), "--out",
                               str(tmp_path / "h")]) == 0
    printed = capsys.readouterr()
    output = printed.out + printed.err
    assert "Traceback" not in ours(output) and "+611" not in output
    assert len(said(printed.out, "night set aside")) == 1
    assert len(said(printed.err, "set aside")) <= 1  # the warning, once per process at most
    csv = pl.read_csv(tmp_path / "h" / "history.csv")
    assert csv.filter(pl.col("set_aside").is_not_null()).height == 1
    assert "set aside" in (tmp_path / "h" / "history.html").read_text()


def test_a_deleted_night_is_a_gap_and_the_finding_across_it_says_so(tmp_path, capsys):
    """Each night names the one before it: a night whose file was deleted shows where it was,
    on the console, in history.csv and on the page, and the finding that compares the nights
    on either side says they are not consecutive."""
    store = ArtifactStore(tmp_path / "store")
    record(store, 1, pair(good()))
    record(store, 2, pair(good()))
    record(store, 3, pair(worse()))
    night_file(tmp_path / "store", 2).unlink()
    nights = read_nights(store)
    assert [(n.night.day, n.gone) for n in nights] == [(1, False), (2, True), (3, False)]
    [overall] = [f for f in all_findings(nights) if f.group == "OVERALL"]
    assert overall.skipped == ["2026-11-02 02:00 gone"]
    assert "2026-11-01 02:00 (r1, m-snap (f)) -> 2026-11-03 02:00 (r1, m-snap (f)) (not " \
           "consecutive: 2026-11-02 02:00 gone between)" in overall.line()

    capsys.readouterr()
    assert run_cli("history", ["--store", str(tmp_path / "store"), "--out",
                               str(tmp_path / "h")]) == 0
    printed = capsys.readouterr().out
    assert len(said(printed, "night gone: its file was deleted")) == 1
    assert "not consecutive: 2026-11-02 02:00 gone between" in printed
    csv = pl.read_csv(tmp_path / "h" / "history.csv")
    assert csv.filter(pl.col("gap").is_not_null())["gap"].to_list() == ["gone"]
    assert "gone: " in (tmp_path / "h" / "history.html").read_text()


def test_a_labelled_run_after_a_truncated_night_compares_with_the_older_one(
        fake, tmp_path, capsys, monkeypatch):
    model = NightlyModel()
    fake.responders["nightly"] = model
    fake.responders["verdicts"] = verdict_judge
    store = tmp_path / "store"
    for day in (1, 2, 3):
        monkeypatch.setenv("PROACTFLOW_NOW", f"2026-11-0{day}T09:00:00+00:00")
        model.bad = day == 3
        if day == 3:
            truncate(next((store / "history" / "checkpoints").glob("20261102T*.json")))
        args = cli_args(fake, store, eval_model="openai/nightly", judge_model="openai/verdicts",
                        extra=("--eval-revision", f"ckpt-{day}", "--label", "checkpoints",
                               "--out", str(tmp_path / f"day{day}")))
        assert run_cli("run", args) == 0
    printed = capsys.readouterr()
    output = printed.out + printed.err
    assert "Traceback" not in ours(output)
    regression = said(printed.out, "REGRESSION: openai/nightly judged by openai/verdicts "
                                   "(proactbench, OVERALL)")
    assert regression and "2026-11-01" in regression[0] and "2026-11-03" in regression[0]
    assert len(said(output, "set aside")) <= 2 and "set aside" in output  # once per process


def test_a_night_written_now_reads_back_whole(tmp_path):
    """The checks pass every night a sweep writes (no false gap)."""
    store = ArtifactStore(tmp_path / "store")
    entry = pair(good())
    entry["scores"] = [{"group": "OVERALL", "metric": "weighted score", "evaluated": 36,
                        "score": 0.5, "ci_low": 0.4, "ci_high": 0.6}]
    write_night(store, "nightly", "proactbench", datetime(2026, 11, 1, tzinfo=timezone.utc),
                "run1", [entry], {"report": None, "viewer": None})
    assert [n.set_aside for n in read_nights(store)] == [None]
