"""Three nights of one series into one `out` folder: each night keeps its own pages, and the
regression the third night finds has its side-by-side page, though the refresh that found it
asked the model again under the same keys.

The model answers well on nights 1 and 2 (one checkpoint label, one snapshot: night 2 reuses
night 1's results); on night 3 another snapshot serves the same label and answers badly. The
snapshot check notices it and `refresh_on_change` asks it again: new versions of the responses
and judgments beside those nights 1 and 2 read.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import polars as pl

from helpers import run_cli
from test_history import NightlyModel, _sweep_file, verdict_judge
from test_store_admin import age_files


def _path(uri: str) -> Path:
    """A file:// link as a path (without its #fragment)."""
    return Path(unquote(urlparse(uri).path))


def _verdicts(viewer: Path) -> list[str]:
    """Every verdict a viewer folder holds, from its samples' detail files."""
    found = []
    for detail in sorted((viewer / "data").glob("t*.js")):
        text = detail.read_text(encoding="utf-8")
        data = json.loads(text[text.index(",") + 1:text.rindex(")")])
        found += [result["verdict"] for result in data["results"]]
    return found


def test_three_nights_keep_their_pages_and_the_refreshed_regression_its_side_by_side(
        fake, tmp_path, capsys, monkeypatch, prefect_server):
    model = NightlyModel()
    fake.responders["nightly"] = model
    fake.responders["verdicts"] = verdict_judge
    store, out, config = tmp_path / "store", tmp_path / "nightly", tmp_path / "nightly.toml"
    _sweep_file(config, fake, store, out, "ckpt-1")
    printed = {}
    for night in (1, 2, 3):
        monkeypatch.setenv("PROACTFLOW_NOW", f"2026-11-0{night}T02:00:00+00:00")
        if night == 3:  # another snapshot behind the same name and label, and worse
            model.fingerprint, model.bad = "fp-2", True
        run_cli("sweep", ["--config", str(config)])
        printed[night] = capsys.readouterr().out
    assert "REGRESSION" not in printed[2]
    assert "CHANGED openai/nightly" in printed[3] and "REGRESSION" in printed[3]

    # The latest night's pages where they always were: the entry point.
    for page in ("report.html", "viewer/index.html", "sweep.md", "compare/1/index.html"):
        assert (out / page).exists(), page

    # history.csv: three nights, each with its own existing report and viewer.
    history = tmp_path / "history"
    assert run_cli("history", ["--config", str(config), "--out", str(history)]) == 0
    capsys.readouterr()
    rows = pl.read_csv(history / "history.csv").filter(
        (pl.col("model") == "openai/nightly") & (pl.col("group") == "OVERALL")).sort("night")
    assert rows.height == 3
    for column in ("report", "viewer"):
        links = rows[column].to_list()
        assert len(set(links)) == 3, links
        assert all(_path(link).is_file() for link in links), links
        assert all("/nights/" in link for link in links)
    page = (history / "history.html").read_text(encoding="utf-8")
    assert all(link in page for link in rows["viewer"].to_list())

    # Night 3's regression: its before viewer is night 2's own page, with night 2's verdicts,
    # its after viewer night 3's.
    summary = (out / "sweep.md").read_text(encoding="utf-8")
    viewers = re.search(r"viewer: \[before\]\((\S+)\) \| \[after\]\((\S+)\)", summary)
    assert viewers is not None, summary
    before, after = viewers.groups()
    assert (before, after) == tuple(rows["viewer"].to_list()[1:])
    before_verdicts, after_verdicts = (_verdicts(_path(link).parent) for link in (before, after))
    assert before_verdicts and set(before_verdicts) <= {"PASS", "not scored"}
    assert "PASS" in before_verdicts and "FAIL" in after_verdicts
    assert "PASS" not in after_verdicts

    # The side-by-side page the regression links: both verdicts of each changed sample, the
    # night before's first, each card saying before or after, its night and its snapshot.
    linked = re.findall(r"\[side by side\]\((\S+?)#t=", summary)
    assert linked and len(set(linked)) == 1, summary
    side = _path(linked[0])
    assert side.is_file() and "/nights/" in linked[0]
    index = side.read_text(encoding="utf-8")
    assert "· before · 2026-11-02 02:00 (ckpt-1, nightly (fp-1))" in index
    assert "· after · 2026-11-03 02:00 (ckpt-1, nightly (fp-2))" in index
    details = sorted((side.parent / "data").glob("t*.js"))
    assert details
    for detail in details:
        text = detail.read_text(encoding="utf-8")
        data = json.loads(text[text.index(",") + 1:text.rindex(")")])
        assert [(r["evaluation"], r["verdict"]) for r in data["results"]] == \
            [(0, "PASS"), (1, "FAIL")]
        assert [r["response"].split(" ")[0] for r in data["results"]] == ["good", "bad"]

    # gc keeps the versions the nights read, though the refresh replaced them days ago: the
    # history's own side-by-side page still shows night 2's verdicts.
    age_files(store, 3 * 86400)
    assert run_cli("gc", ["--store", str(store), "--keep-latest", "1"]) == 0
    again = tmp_path / "again"
    assert run_cli("history", ["--config", str(config), "--out", str(again)]) == 0
    capsys.readouterr()
    pages = sorted((again / "compare").glob("*/index.html"))
    assert len(pages) == 1
    assert _verdicts(pages[0].parent) == ["PASS", "FAIL"] * len(details)
