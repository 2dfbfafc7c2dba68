"""The viewer of a store holding all four suites: each suite's samples open by deep link in a
real headless browser, with what the model saw (the multimodal step's exact image, the video's
frames) loaded at their natural size; one screenshot per suite for docs/reports.md."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

from browser import Browser, chromium_path
from helpers import run_cli
from viewer_stores import four_suites

needs_chromium = pytest.mark.skipif(
    chromium_path() is None and os.environ.get("CI") != "true",
    reason="needs Chromium for the browser test (apt-get install chromium)")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return four_suites(tmp_path_factory.mktemp("four"))


@pytest.fixture(scope="module")
def viewer(store) -> Path:
    out = store.parent / "viewer"
    # Proactive Agent's run has an event whose reply was never the protocol's JSON: incomplete.
    assert run_cli("view", ["--store", str(store), "--out", str(out), "--no-open",
                            "--include-incomplete"]) == 0
    return out


def index_of(viewer: Path) -> dict:
    page = (viewer / "index.html").read_text(encoding="utf-8")
    start = page.index("const INDEX = ") + len("const INDEX = ")
    return json.loads(page[start:page.index(";\nconst PAGE_SIZE")])


def test_one_viewer_lists_every_suite_and_keeps_images_out_of_the_index(viewer):
    index = index_of(viewer)
    assert [s["name"] for s in index["suites"]] == [
        "proactbench", "proactiveagent", "proactivebench-mllm", "proactivebench-video"]
    page = (viewer / "index.html").read_bytes()
    assert b"base64," not in page and len(page) < 200_000
    media = sorted(p.suffix for p in (viewer / "media").iterdir())
    assert ".png" in media or ".jpg" in media


def test_without_include_incomplete_the_viewer_says_what_it_left_out(store, tmp_path, capsys):
    out = tmp_path / "viewer"
    assert run_cli("view", ["--store", str(store), "--out", str(out), "--no-open"]) == 0
    assert "1 incomplete evaluations of other suites not shown" in capsys.readouterr().out
    assert "proactiveagent" not in [s["name"] for s in index_of(out)["suites"]]


def test_report_writes_the_same_viewer_of_every_suite(store, tmp_path, capsys):
    capsys.readouterr()
    assert run_cli("report", ["--store", str(store), "--out", str(tmp_path / "report")]) == 0
    console = capsys.readouterr().out
    # The console names every file written, for every suite, and what it left out.
    written = [Path(line.removeprefix("wrote ")) for line in console.splitlines()
               if line.startswith("wrote ")]
    assert {"report.html", "leaderboard.csv", "proactivebench_mllm_leaderboard.csv",
            "proactivebench_video_leaderboard.csv", "index.html"} <= {p.name for p in written}
    assert all(path.exists() for path in written)
    assert "ProactiveBench (multimodal): openai/seer judged by rules" in console
    assert any(line.startswith("left out as incomplete") and
               "ProactiveBench (Proactive Agent): openai/agent judged by openai/reward" in line
               for line in console.splitlines())
    index = index_of(tmp_path / "report" / "viewer")
    # By default complete evaluations only, as the report's tables: Proactive Agent's run has
    # an event not scored.
    assert [s["name"] for s in index["suites"]] == [
        "proactbench", "proactivebench-mllm", "proactivebench-video"]
    assert 'href="viewer/index.html"' in (tmp_path / "report" / "report.html").read_text()


@needs_chromium
def test_the_report_has_a_table_chart_and_anchors_per_suite_and_fits_the_screen(store, tmp_path):
    out = tmp_path / "report"
    assert run_cli("report", ["--store", str(store), "--out", str(out)]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    for anchor in ("proactbench", "proactiveagent", "proactivebench-mllm",
                   "proactivebench-mllm-mcqa", "proactivebench-video"):
        assert f'id="{anchor}"' in page and f'href="#{anchor}"' in page
    assert page.count("<table class='pivot'>") == 3  # ProactBench, multimodal MCQA, video
    assert page.count("<svg") >= 3  # a chart per suite
    # Proactive Agent's only run is incomplete: listed with what is missing, not dropped.
    assert "Left out as incomplete" in page and "openai/agent judged by openai/reward" in page
    assert "invalid reply 1" in page or "not scored:" in page
    # Every evaluation has its own anchor in its suite's table.
    mllm = pl.read_csv(out / "proactivebench_mllm_leaderboard.csv")
    assert {"variant", "ci_low", "ci_high", "rank"} <= set(mllm.columns)
    key = mllm["evaluation"][0]
    assert f'id="proactivebench-mllm-{key[:10]}"' in page
    assert mllm.filter(pl.col("dataset") == "all")["ci_low"][0] is not None
    with Browser((out / "report.html").resolve().as_uri()) as browser:
        browser.wait_for("document.querySelectorAll('table.pivot').length === 3")
        assert browser.evaluate("document.documentElement.scrollWidth") <= 1400
        widest = browser.evaluate("Math.max(...[...document.querySelectorAll('table')]"
                                  ".filter(t => !t.closest('details'))"
                                  ".map(t => t.getBoundingClientRect().right))")
        assert widest <= 1400
        shots = Path(os.environ.get("PROACTFLOW_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        browser.screenshot(shots / "report-suites.png")


def test_the_mcqa_scorer_has_one_name_in_runs_ls_and_the_report(store, tmp_path, capsys):
    assert run_cli("runs", ["ls", "--store", str(store)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert "openai/seer judged by rules" in "\n".join(listing)
    # A suite column, so that the suites' runs do not read alike.
    assert listing[0].split()[3] == "suite"
    assert {line.split()[3] for line in listing[1:]} >= {
        "proactbench", "proactiveagent", "proactivebench-mllm", "proactivebench-video"}
    out = tmp_path / "report"
    assert run_cli("report", ["--store", str(store), "--out", str(out)]) == 0
    board = pl.read_csv(out / "proactivebench_mllm_leaderboard.csv")
    assert set(board["judge"]) == {"rules"} and "deterministic" not in \
        (out / "report.html").read_text(encoding="utf-8")


def test_report_selects_every_suites_evaluations_by_model(store, tmp_path):
    out = tmp_path / "report"
    assert run_cli("report", ["--store", str(store), "--out", str(out),
                              "--model", "openai/seer"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="proactivebench-mllm"' in page
    assert 'id="proactivebench-video"' not in page and "tiny-model" not in page
    assert [s["name"] for s in index_of(out / "viewer")["suites"]] == ["proactivebench-mllm"]


def loaded_images(page: Browser) -> list[list]:
    """[file, complete, naturalWidth, naturalHeight] of each image of the open sample."""
    return page.evaluate("[...document.querySelectorAll('#detail img')].map(i => "
                         "[i.dataset.file, i.complete, i.naturalWidth, i.naturalHeight])")


def open_link(viewer: Path, address: str, shot: str, tmp_path: Path) -> tuple[str, list]:
    """Open the viewer at `address`, wait for the sample and its images, screenshot it."""
    with Browser(f"{(viewer / 'index.html').resolve().as_uri()}#{address}") as page:
        page.wait_for("document.querySelectorAll('#sides .side').length > 0")
        page.wait_for("[...document.querySelectorAll('#detail img')].every(i => i.complete)")
        detail = page.evaluate("document.getElementById('detail').innerText")
        images = loaded_images(page)
        assert page.evaluate("location.hash") == "#" + address
        shots = Path(os.environ.get("PROACTFLOW_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(shots / shot)
    return detail, images


def natural_size(viewer: Path, name: str) -> tuple[int, int]:
    from PIL import Image

    with Image.open(viewer / "media" / name) as image:
        return image.size


@needs_chromium
def test_a_link_opens_a_proactive_agent_trace_with_each_events_cells(viewer, tmp_path):
    detail, _ = open_link(viewer, "s=proactiveagent&t=writing_b", "viewer-proactiveagent.png",
                          tmp_path)
    assert "proposal" in detail and "reward model's thought" in detail
    assert "as the user I would" in detail  # the reward model's thought
    assert any(word in detail.split() for word in ("TP", "FP", "TN", "FN"))


@needs_chromium
def test_a_link_opens_a_multimodal_episode_with_the_exact_images_seen(viewer, tmp_path):
    index = index_of(viewer)
    suite = [s["name"] for s in index["suites"]].index("proactivebench-mllm")
    coco = next(s[1] for s in index["samples"] if s[0] == suite and s[2] == "COCO")
    detail, images = open_link(viewer, f"s=proactivebench-mllm&t={coco}",
                               "viewer-mllm.png", tmp_path)
    assert "step 0" in detail and "cropped to" in detail  # the environment's crop
    assert images and all(complete and width > 0 for _, complete, width, _ in images)
    for name, _, width, height in images:
        assert (width, height) == natural_size(viewer, name)
        # Named by the hash of the bytes sent: the step's recorded image_sha256.
        import hashlib

        assert hashlib.sha256((viewer / "media" / name).read_bytes()).hexdigest() \
            == name.split(".")[0]


@needs_chromium
def test_a_link_opens_a_video_timeline_with_its_frames_and_gold_windows(viewer, tmp_path):
    detail, images = open_link(viewer, "s=proactivebench-video&t=EGO:ego-1",
                               "viewer-video.png", tmp_path)
    assert "Timeline" in detail and "Gold turns" in detail and "PAUC 0.5" in detail
    assert "A green square" in detail  # a gold answer and the model's reply
    assert len(images) >= 8  # a frame per second of the 8-s video
    for name, complete, width, height in images:
        assert complete and (width, height) == natural_size(viewer, name)


@needs_chromium
def test_a_link_still_opens_a_proactbench_trigger_and_the_suite_chooser_switches(viewer,
                                                                                 tmp_path):
    voyage = "BP_TEST_02_VOYAGE__style11__1079a835fb3351be59143397f999e1fb"
    with Browser(f"{(viewer / 'index.html').resolve().as_uri()}#t={voyage}:1") as page:
        page.wait_for("document.querySelectorAll('#sides .side').length === 1")
        assert "turn 1" in page.evaluate("document.getElementById('detail').innerText")
        page.evaluate("(() => { const s = document.getElementById('f-suite'); s.value = '3';"
                      " s.dispatchEvent(new Event('change')); })()")
        assert page.evaluate("location.hash") == "#s=proactivebench-video"
        assert page.evaluate("[...document.querySelectorAll('#list thead th')]"
                             ".map(h => h.textContent)") == [
            "question", "part", "turns", "evaluation", "outcome"]
        page.evaluate("history.back()")
        page.wait_for(f"document.getElementById('detail').innerText.includes('{voyage}')")


@needs_chromium
def test_a_multimodal_sample_with_two_evaluations_shows_both_uncut(store, tmp_path):
    """Two evaluations of one multimodal sample (the side-by-side page of two nights is such a
    viewer) in the 1,400-pixel window: each card whole inside the detail pane, side by side
    when they fit, else one under the other; screenshot docs/images/viewer-mllm-two.png."""
    from dataclasses import replace

    from proactflow.cache.artifacts import ArtifactStore
    from proactflow.results.suite_evaluations import suite_evaluation
    from proactflow.results.viewer.site import write_viewer
    from proactflow.suites import get_suite

    artifacts = ArtifactStore(store)
    suite = get_suite("proactivebench-mllm")
    key = sorted(artifacts.keys(suite.stages.judgments))[0]
    evaluation = suite_evaluation(suite, artifacts, key)
    assert evaluation is not None
    out = tmp_path / "two"
    write_viewer([replace(evaluation, label=f"{evaluation.base_label} · {when}")
                  for when in ("before · 2026-11-02 02:00", "after · 2026-11-03 02:00")],
                 out, artifacts)
    index = index_of(out)
    coco = next(s[1] for s in index["samples"] if s[2] == "COCO")
    with Browser(f"{(out / 'index.html').resolve().as_uri()}#s=proactivebench-mllm&t={coco}"
                 ) as page:
        page.wait_for("document.querySelectorAll('#sides .side').length === 2")
        page.wait_for("[...document.querySelectorAll('#detail img')].every(i => i.complete)")
        pane = page.evaluate("(() => { const r = document.getElementById('detail')"
                             ".getBoundingClientRect(); return [r.left, r.right]; })()")
        cards = page.evaluate("[...document.querySelectorAll('#sides .side')].map(s => { "
                              "const r = s.getBoundingClientRect(); "
                              "return [r.left, r.right, r.top, r.width]; })")
        for left, right, _, width in cards:
            assert pane[0] <= left and right <= pane[1] + 0.5 and width > 200, (pane, cards)
        (first_left, _, first_top, _), (second_left, _, second_top, _) = cards
        assert second_left > first_left or second_top > first_top  # beside, or under
        # Nothing reaches past its card: the lines of facts wrap, images and tables fit.
        assert page.evaluate("[...document.querySelectorAll('#sides .side')].every(s => "
                             "s.scrollWidth <= s.clientWidth + 1)")
        # The list's badges whole, an outcome the suite's spec does not list included.
        assert page.evaluate("[...document.querySelectorAll('#list tbody .badge')].filter(b => "
                             "b.getBoundingClientRect().right > "
                             "b.parentElement.getBoundingClientRect().right - 1).length") == 0
        headings = page.evaluate("[...document.querySelectorAll('#sides .side h3')]"
                                 ".map(h => h.textContent)")
        assert any("before" in h for h in headings) and any("after" in h for h in headings)
        shots = Path(os.environ.get("PROACTFLOW_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(shots / "viewer-mllm-two.png")


@needs_chromium
def test_the_video_lists_outcome_badges_are_not_cut(viewer):
    with Browser(f"{(viewer / 'index.html').resolve().as_uri()}#s=proactivebench-video") \
            as page:
        page.wait_for("document.querySelectorAll('#list tbody .badge').length > 0")
        cut = page.evaluate("[...document.querySelectorAll('#list tbody .badge')].filter(b => "
                            "b.getBoundingClientRect().right > "
                            "b.parentElement.getBoundingClientRect().right - 1)"
                            ".map(b => b.textContent)")
        assert cut == []
