"""The per-trigger viewer: built from the store, filtered and opened in a real headless browser."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from browser import Browser, chromium_path
from helpers import cli_args, run_cli
from proactflow.cache.artifacts import ArtifactStore
from proactflow.results.evaluations import distinguish, stored_evaluations
from proactflow.results.viewer.site import build_view, short_names, write_viewer
from replay import SAMPLE_CORPUS, SAMPLE_RESULTS

VOYAGE_REPLY_MARKUP = "<script>alert(1)</script>"
VOYAGE = "BP_TEST_02_VOYAGE__style11__1079a835fb3351be59143397f999e1fb"
GARDEN = "BP_TEST_01_GARDEN__style3__4d9ca3ee5a3346324a34549e34d78836"
needs_chromium = pytest.mark.skipif(
    chromium_path() is None and os.environ.get("CI") != "true",
    reason="needs Chromium for the browser test (apt-get install chromium)")


@pytest.fixture
def two_models(fake, store, prefect_server):
    """The hand-labelled tiny-model (imported) and a synthetic model run on the same corpus."""
    assert run_cli("import", [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS),
                              "--store", str(store), "--judge-model", "openai/judge2"]) == 0
    assert run_cli("run", cli_args(fake, store, eval_model="openai/synth",
                                   judge_model="openai/judge2")) == 0
    return store


def test_view_writes_an_index_and_one_data_file_per_trigger(two_models, tmp_path, capsys):
    out = tmp_path / "viewer"
    assert run_cli("view", ["--store", str(two_models), "--out", str(out), "--no-open"]) == 0
    assert "2 evaluations, 10 triggers, 20 verdicts" in capsys.readouterr().out
    page = (out / "index.html").read_text(encoding="utf-8")
    assert VOYAGE_REPLY_MARKUP not in page  # responses are not in the page, and never raw
    assert len(list((out / "data").glob("t*.js"))) == 10
    opened = next(p for p in (out / "data").glob("t*.js")
                  if "VOYAGE" in p.read_text(encoding="utf-8")
                  and "<\\/script>" in p.read_text(encoding="utf-8"))
    assert opened.stat().st_size < 20_000
    # Selections work as for the report: one model only.
    assert run_cli("view", ["--store", str(two_models), "--out", str(out), "--no-open",
                            "--model", "openai/synth"]) == 0
    assert "1 evaluations, 10 triggers, 10 verdicts" in capsys.readouterr().out


def test_view_of_an_empty_store_is_one_line(tmp_path, capsys):
    assert run_cli("view", ["--store", str(tmp_path / "none"), "--no-open"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@needs_chromium
def test_in_a_browser_filter_open_a_trigger_and_compare_two_models(two_models, tmp_path):
    out = tmp_path / "viewer"
    assert run_cli("view", ["--store", str(two_models), "--out", str(out), "--no-open"]) == 0
    with Browser((out / "index.html").resolve().as_uri()) as page:
        page.wait_for("document.querySelectorAll('#list tbody tr').length > 0")
        page.evaluate("window.alerted = false; window.alert = () => { window.alerted = true; }")
        assert page.evaluate("document.getElementById('count').textContent") \
            .startswith("20 verdicts")

        def choose(select: str, value: str) -> None:
            page.evaluate(f"(() => {{ const s = document.getElementById({select!r}); "
                          f"s.value = {value!r}; s.dispatchEvent(new Event('change')); }})()")

        choose("f-verdict", "not scored")
        assert page.evaluate("document.getElementById('count').textContent") \
            .startswith("2 verdicts")  # the trigger without a user message, in both
        choose("f-verdict", "")
        choose("f-phase", "EMERGENT")
        page.evaluate("document.querySelectorAll('#f-models input').forEach(i => i.click())")
        rows = page.evaluate("[...document.querySelectorAll('#list tbody tr')]"
                             ".map(r => r.innerText)")
        assert rows and all("EMERGENT" in row for row in rows)
        page.evaluate("[...document.querySelectorAll('#list tbody tr')]"
                      ".find(r => r.innerText.includes('VOYAGE')).click()")
        page.wait_for("document.querySelectorAll('#sides .side').length === 2")
        detail = page.evaluate("document.getElementById('detail').innerText")
        assert "turn 1" in detail and "EMERGENT" in detail
        assert "Kyōto" in detail and "🌸" in detail  # context, non-ASCII intact
        assert "PASS: The assistant acts on the unstated need" in detail  # the rubric
        assert VOYAGE_REPLY_MARKUP in detail  # shown as text...
        assert page.evaluate("window.alerted") is False  # ...never run
        assert page.evaluate("document.querySelectorAll('#detail script').length") == 0
        labels = page.evaluate("[...document.querySelectorAll('#sides .side h3')]"
                               ".map(h => h.innerText)")
        assert any("tiny-model" in label for label in labels)
        assert any("openai/synth" in label for label in labels)
        marks = page.evaluate("[...document.querySelectorAll('#sides mark')]"
                              ".map(m => m.innerText)")
        assert "Réservez l'hôtel dès mai" in marks  # the judge's evidence, highlighted
        shots = Path(os.environ.get("PROACTFLOW_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(shots / "viewer-two-models.png")
        assert (shots / "viewer-two-models.png").stat().st_size > 10_000


def test_short_names_are_the_shortest_tail_no_other_name_ends_with():
    assert short_names(["openai/echo-alpha", "openai/judge-const-PARTIAL", "tiny-model",
                        "openai/x", "azure/x", "hub/org/m", "other/org/m"]) == {
        "openai/echo-alpha": "echo-alpha", "openai/judge-const-PARTIAL": "judge-const-PARTIAL",
        "tiny-model": "tiny-model", "openai/x": "openai/x", "azure/x": "azure/x",
        "hub/org/m": "hub/org/m", "other/org/m": "other/org/m"}
    assert short_names(["x", "openai/x"]) == {"x": "x", "openai/x": "openai/x"}


def _many_long_names(store: Path) -> list:
    """The stored evaluations under the issue's long names (three models, two judges): 60
    verdicts whose full label is far wider than the list's column."""
    stored = stored_evaluations(ArtifactStore(store))
    return distinguish([replace(evaluation, model=f"openai/echo-{name}", judge=judge)
                        for name in ("alpha", "beta", "gamma")
                        for evaluation, judge in zip(stored, ["openai/judge-const-PARTIAL",
                                                              "openai/judge2"])])


def test_the_list_names_evaluations_short_and_keeps_the_full_label(two_models):
    index, _ = build_view(_many_long_names(two_models))
    first = index["evaluations"][0]
    assert first["label"] == "openai/echo-alpha judged by openai/judge-const-PARTIAL"
    assert first["short"] == "echo-alpha \u00b7 judge-const-PARTIAL"
    assert index["short_models"]["openai/echo-beta"] == "echo-beta"
    # One judge: the judge's name is left out of every row.
    stored = stored_evaluations(ArtifactStore(two_models))
    one_judge, _ = build_view(stored)
    assert sorted(e["short"] for e in one_judge["evaluations"]) == ["synth", "tiny-model"]


@needs_chromium
def test_in_a_browser_a_screen_shows_thirty_one_line_rows(two_models, tmp_path):
    page_file = write_viewer(_many_long_names(two_models), tmp_path / "viewer")
    with Browser(page_file.resolve().as_uri()) as page:
        page.wait_for("document.querySelectorAll('#list tbody tr').length === 60")
        # The window is 1400x900; the page gets what its frame leaves (757 pixels high here).
        assert page.evaluate("[outerWidth, outerHeight]") == [1400, 900]
        assert page.evaluate("innerHeight") <= 900
        heights = page.evaluate("[...document.querySelectorAll('#list tbody tr')]"
                                ".map(r => r.getBoundingClientRect().height)")
        assert len(set(heights)) == 1  # one line each, whatever the label's length
        visible = page.evaluate(
            "(() => { const list = document.getElementById('list').getBoundingClientRect();"
            " return [...document.querySelectorAll('#list tbody tr')].filter(r => {"
            " const box = r.getBoundingClientRect();"
            " return box.top >= list.top && box.bottom <= list.bottom; }).length; })()")
        assert visible >= 30
        cell = page.evaluate("(() => { const c = document.querySelector("
                             "'#list tbody tr td:nth-child(4)'); return [c.textContent, c.title];"
                             " })()")
        assert cell == ["echo-alpha \u00b7 judge-const-PARTIAL",
                        "openai/echo-alpha judged by openai/judge-const-PARTIAL"]
        shots = Path(os.environ.get("PROACTFLOW_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(shots / "viewer-rows.png")


@needs_chromium
def test_in_a_browser_a_link_opens_a_trigger_and_two_models_and_back_goes_back(two_models,
                                                                                tmp_path):
    page_file = write_viewer(stored_evaluations(ArtifactStore(two_models)), tmp_path / "viewer")
    link = f"{page_file.resolve().as_uri()}#t={VOYAGE}:1&m=tiny-model&m=openai/synth"
    with Browser(link) as page:
        page.wait_for("document.querySelectorAll('#sides .side').length === 2")
        detail = page.evaluate("document.getElementById('detail').innerText")
        assert f"{VOYAGE}, turn 1" in detail and VOYAGE_REPLY_MARKUP in detail
        assert page.evaluate("[...document.querySelectorAll('#f-models input')]"
                             ".filter(i => i.checked).map(i => i.value)") \
            == ["openai/synth", "tiny-model"]
        assert page.evaluate("[...document.querySelectorAll('#list tr.open')]"
                             ".every(r => r.textContent.includes('VOYAGE'))") is True
        # A filter change stays in the address without a new history entry.
        entries = page.evaluate("history.length")
        page.evaluate("(() => { const s = document.getElementById('f-verdict');"
                      " s.value = 'PASS'; s.dispatchEvent(new Event('change')); })()")
        assert page.evaluate("location.hash") \
            == f"#t={VOYAGE}:1&m=openai/synth&m=tiny-model&verdict=PASS"
        assert page.evaluate("history.length") == entries
        page.evaluate("document.getElementById('f-verdict').value = '';"
                      "document.getElementById('f-verdict').dispatchEvent(new Event('change'))")
        # Opening another trigger is a new entry; back and forward move between the two.
        page.evaluate(f"[...document.querySelectorAll('#list tbody tr')]"
                      f".find(r => r.textContent.includes('GARDEN')).click()")
        page.wait_for(f"document.getElementById('detail').innerText.includes('{GARDEN}')")
        assert page.evaluate("location.hash").startswith(f"#t={GARDEN}:")
        page.evaluate("history.back()")
        page.wait_for(f"document.getElementById('detail').innerText"
                      f".includes('{VOYAGE}, turn 1')")
        assert page.evaluate("document.querySelectorAll('#sides .side').length") == 2
        page.evaluate("history.forward()")
        page.wait_for(f"document.getElementById('detail').innerText.includes('{GARDEN}')")
        # A link to a trigger this viewer lacks says so, and still applies its filters.
        page.evaluate("location.hash = '#t=NO_SUCH:3&m=openai/synth'")
        page.wait_for("document.getElementById('detail').innerText.includes('NO_SUCH:3')")
        assert page.evaluate("document.getElementById('count').textContent") \
            .startswith("10 verdicts")
