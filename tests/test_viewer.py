"""The per-trigger viewer: built from the store, filtered and opened in a real headless browser."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from browser import Browser, chromium_path
from helpers import cli_args, run_cli
from replay import SAMPLE_CORPUS, SAMPLE_RESULTS

VOYAGE_REPLY_MARKUP = "<script>alert(1)</script>"


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


@pytest.mark.skipif(chromium_path() is None,
                    reason="needs Chromium for the browser test (apt-get install chromium)")
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
