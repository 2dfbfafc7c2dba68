"""Size and speed of the viewer at full scale: 16 models x 624 triggers (ProactBench), and
16 models x 7,557 samples (the multimodal ProactiveBench, the largest suite).

Run by hand from the repository root (not part of the tests; needs ../shared for the corpus):

    .venv/bin/python benchmarks/viewer_size.py
    .venv/bin/python benchmarks/viewer_size.py --largest

It builds the benchmark-size corpus as run_benchmark.py does, gives 16 made-up models a
1,500-character reply and a verdict on every trigger, writes the viewer and prints the size of
the page, of one trigger's data file and of the whole folder, and the time to write it. With
Chromium installed it also opens the page headless and prints how long the list takes to show
and a trigger to open.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from browser import Browser, chromium_path  # noqa: E402
from run_benchmark import build_corpus  # noqa: E402

from proactflow.results.evaluation import Evaluation, EvaluationTables  # noqa: E402
from proactflow.results.evaluations import triggers_suite  # noqa: E402
from proactflow.suites.sources import read_corpus_file  # noqa: E402
from proactflow.suites.proactbench.triggers import build_triggers  # noqa: E402
from proactflow.results.viewer.site import write_viewer  # noqa: E402

MODELS = 16


def made_up_evaluation(triggers: pl.DataFrame, number: int) -> Evaluation:
    rng = random.Random(number)
    keys = triggers.select("unique_id_eval", "turn", "phase")
    text = [f"Model {number} reply {i}: " + "a proactive step. " * 85 for i in range(keys.height)]
    responses = keys.with_columns(sample_index=pl.lit(0), status=pl.lit("ok"),
                                  response=pl.Series(text))
    scores = [rng.choice(["PASS", "PARTIAL", "FAIL"]) for _ in range(keys.height)]
    judgments = keys.with_columns(
        sample_index=pl.lit(0), status=pl.lit("scored"), score=pl.Series(scores),
        rationale=pl.lit("Because the reply names a concrete next step. " * 3),
        evidence=pl.Series([t[:40] for t in text]), evidence_verbatim=pl.lit(True),
        message=pl.lit(None, dtype=pl.String))
    return Evaluation(triggers_suite(), f"key{number}", f"model-{number}", "judge",
                      label=f"model-{number} judged by judge",
                      tables=EvaluationTables("sha", triggers, responses, judgments))


LARGEST = 7557
"""The multimodal ProactiveBench's MCQA samples (docs/suites/proactivebench-mllm.md)."""


class MadeUpSuite:
    """Stands in for the multimodal suite: its view spec, and made-up episodes of three steps
    per sample (no images: the index is what is measured)."""

    name, display_name = "proactivebench-mllm", "ProactiveBench (multimodal)"

    def view_spec(self):
        from proactflow.suites.proactivebench_mllm.presentation.views import SPEC

        return SPEC

    def sample_views(self, store, key):
        from proactflow.suites.declarations import SampleView
        from proactflow.suites.views import facts, text

        rng = random.Random(key)
        datasets = ["ROD", "VSOD", "MVP-N", "IN-C", "QD", "CIT", "COCO"]
        for number in range(LARGEST):
            dataset = datasets[number % 7]
            yield SampleView(
                sample=f"{dataset}:{number}", cells=(dataset, str(number), "umbrella"),
                outcome=rng.choice(["correct", "wrong"]), shared=[facts(("answer", "umbrella"))],
                result=[text("reply", f"step {step}: Move the occluding object.")
                        for step in range(3)])


def largest() -> None:
    folder = Path(tempfile.mkdtemp(prefix="proactflow-viewer-bench-"))
    others = [Evaluation(MadeUpSuite(), f"key{n}", f"model-{n}", "rules",  # type: ignore
                         "mcqa", True, label=f"model-{n} judged by rules (mcqa)")
              for n in range(MODELS)]
    started = time.monotonic()
    page = write_viewer(others, folder / "viewer", store=object())  # type: ignore
    written = time.monotonic() - started
    print(f"{MODELS} models x {LARGEST} samples: written in {written:.1f} s; index.html "
          f"{page.stat().st_size / 1e3:.0f} kB")
    if chromium_path() is None:
        print("no Chromium here: page timings skipped")
        return
    timings = []
    for _ in range(3):
        with Browser(page.resolve().as_uri()) as browser:
            browser.wait_for("document.querySelectorAll('#list tbody tr').length > 0")
            # From the navigation's start to the list on screen, as the page itself measures.
            timings.append(browser.evaluate("window.proactflowShown") / 1000)
            started = time.monotonic()
            browser.evaluate("(() => { const s = document.getElementById('f-outcome'); "
                             "s.value = 'wrong'; s.dispatchEvent(new Event('change')); })()")
            filtered = time.monotonic() - started
    print(f"in Chromium: the list is on screen {min(timings):.2f} s after navigation starts "
          f"(best of 3: {', '.join(f'{t:.2f}' for t in timings)}); a filter over "
          f"{MODELS * LARGEST} rows in {filtered:.2f} s")


def main() -> None:
    if "--largest" in sys.argv:
        largest()
        return
    folder = Path(tempfile.mkdtemp(prefix="proactflow-viewer-bench-"))
    build_corpus(folder / "corpus.jsonl", 624)
    rows, _ = read_corpus_file(folder / "corpus.jsonl")
    triggers = build_triggers(rows)
    evaluations = [made_up_evaluation(triggers, n) for n in range(MODELS)]
    started = time.monotonic()
    page = write_viewer(evaluations, folder / "viewer")
    written = time.monotonic() - started
    data = sorted((folder / "viewer" / "data").glob("*.js"), key=lambda p: p.stat().st_size)
    total = sum(p.stat().st_size for p in (folder / "viewer").rglob("*") if p.is_file())
    print(f"{MODELS} models x {triggers.height} triggers: written in {written:.1f} s")
    print(f"index.html {page.stat().st_size / 1e3:.0f} kB; one trigger's data "
          f"{data[len(data) // 2].stat().st_size / 1e3:.0f} kB (median), "
          f"{data[-1].stat().st_size / 1e3:.0f} kB (largest); folder {total / 1e6:.1f} MB")
    if chromium_path() is None:
        print("no Chromium here: page timings skipped")
        return
    with Browser(page.resolve().as_uri()) as browser:
        started = time.monotonic()
        browser.wait_for("document.querySelectorAll('#list tbody tr').length > 0")
        listed = time.monotonic() - started
        started = time.monotonic()
        browser.evaluate("document.querySelector('#list tbody tr').click()")
        browser.wait_for(f"document.querySelectorAll('#sides .side').length === {MODELS}")
        opened = time.monotonic() - started
        started = time.monotonic()
        browser.evaluate("(() => { const s = document.getElementById('f-verdict'); "
                         "s.value = 'PASS'; s.dispatchEvent(new Event('change')); })()")
        filtered = time.monotonic() - started
    print(f"in Chromium: list shown {listed:.2f} s after the DevTools connection, a trigger "
          f"with {MODELS} replies side by side in {opened:.2f} s, a filter in {filtered:.2f} s")


if __name__ == "__main__":
    main()
