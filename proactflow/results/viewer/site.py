"""`proactflow view`: a per-sample viewer of every suite's evaluations in a store, as files a
browser opens.

The page (`index.html`) holds only the index: one small row per (sample, evaluation, draw)
with its outcome (a number into the index's list of outcomes), enough to filter and list 16 models x the largest suite at once. What one
sample shows (ProactBench: a trigger's context, rubric, and every evaluation's response and
verdict; the other suites: the blocks their `Suite.sample_views` build) sits in its own
`data/t<n>.js`, loaded when the sample is opened, by a script tag, so the folder works from
`file://` with no server; the images a sample shows are files of `media/`, never inline. All text from the corpus or a model reaches the page as JSON and is
put on screen as text, never as markup.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import polars as pl

from ...cache.artifacts import ArtifactStore, write_atomic
from ...suites.declarations import SampleView
from ..evaluation import Evaluation

if TYPE_CHECKING:
    from ...suites.base import Suite
from .page import PAGE

def _script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element of an HTML page."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) \
        .replace("</", "<\\/").replace("<!--", "<\\!--")


def short_names(names: list[str]) -> dict[str, str]:
    """Each name's shortest tail of `/`-separated parts that no other name ends with
    (`openai/echo-alpha` -> `echo-alpha`), so a list row stays one line; the page shows the
    full name on hover."""
    distinct = sorted(set(names))
    short = {}
    for name in distinct:
        parts = name.split("/")
        for count in range(1, len(parts) + 1):
            tail = "/".join(parts[-count:])
            if not any(other != name and (other == tail or other.endswith("/" + tail))
                       for other in distinct):
                break
        short[name] = tail
    return short


def _short_labels(evaluations: Sequence[Evaluation]) -> list[str]:
    """The list's evaluation column: the short model name, the short judge name only when
    there is more than one judge, and what tells apart evaluations of the same pair."""
    models = short_names([e.model for e in evaluations])
    judges = short_names([e.judge for e in evaluations])
    labels = []
    for evaluation in evaluations:
        label = models[evaluation.model]
        if len(judges) > 1:
            label += f" \u00b7 {judges[evaluation.judge]}"
        full = evaluation.label or evaluation.base_label
        labels.append(label + full[len(evaluation.base_label):]
                      if full.startswith(evaluation.base_label) else label)
    return labels


def _suite_spec(suite: Suite) -> dict[str, Any]:
    spec = suite.view_spec()
    return {"name": suite.name, "title": spec.title or suite.display_name, "noun": "rows",
            "columns": [[c.name, c.width, c.filter] for c in spec.columns],
            "outcome": spec.outcome_name, "extra": list(spec.extra_filters),
            "outcomes": spec.outcomes, "outcome_width": spec.outcome_width}


BADGE_CHARACTER, BADGE_ROOM = 7.5, 30
"""A badge's width per character of its bold 12 px text, and its padding and the cell's."""


def _outcome_width(declared: str, outcomes: list[str]) -> str:
    """The outcome column: as wide as the suite declares, or as its longest outcome's badge
    needs, so that no badge is cut (the video suite's "answered every turn")."""
    if not declared.endswith("px") or not outcomes:
        return declared
    needed = round(BADGE_CHARACTER * max(len(o) for o in outcomes) + BADGE_ROOM)
    return f"{max(int(float(declared[:-2])), needed)}px"


def _evaluation_entry(evaluation: Evaluation, short: str,
                      suite: int) -> dict[str, Any]:
    trigger_set = evaluation.trigger_set
    return {"label": evaluation.label or evaluation.base_label, "short": short,
            "model": evaluation.model, "judge": evaluation.judge, "source": evaluation.source,
            "suite": suite, "trigger_set": trigger_set.describe() if trigger_set else ""}


def build_view(evaluations: list[Evaluation], store: ArtifactStore | None = None,
               write_file: Callable[[str, Any], None] | None = None,
               only: set[str] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The page's index and one detail record per sample (ProactBench: per trigger), for
    `evaluations`: those read with their triggers (their suite's `evaluations_view`) first, as
    the page's first suite, then every other suite's (their blocks read from their own store
    or `store`, their images handed to `write_file(name, bytes or path)`); with `only`, just
    those samples (as the address names them: ProactBench's `<dialogue>:<turn>`)."""
    others = [e for e in evaluations if e.tables is None]
    evaluations = [e for e in evaluations if e.tables is not None]
    suites: list[dict[str, Any]] = []
    samples: list[list[Any]] = []
    details: list[dict[str, Any]] = []
    rows: list[list[Any]] = []
    everything = [*evaluations, *others]
    entries = []
    shorts = _short_labels(everything)
    if evaluations:
        suites.append(evaluations[0].suite.evaluations_view(evaluations, samples, details,
                                                            rows, only))
        entries += [_evaluation_entry(e, short, 0) for e, short in zip(evaluations, shorts)]
    by_suite: dict[str, int] = {}
    for number, (evaluation, short) in enumerate(zip(others, shorts[len(evaluations):]),
                                                 start=len(evaluations)):
        suite = evaluation.suite
        if suite.name not in by_suite:
            by_suite[suite.name] = len(suites)
            suites.append(_suite_spec(suite))
        entries.append(_evaluation_entry(evaluation, short, by_suite[suite.name]))
        source = evaluation.store or store
        assert source is not None, "other suites' evaluations are read from their store"
        views = suite.sample_views(source, evaluation.key)
        _add_views(by_suite[suite.name], number,
                   views if only is None else (v for v in views if v.sample in only),
                   samples, details, rows, write_file)
    index = {
        "suites": suites, "evaluations": entries,
        "short_models": short_names([e.model for e in everything]),
        "short_judges": short_names([e.judge for e in everything]),
        "samples": samples, "outcomes": [], "rows": rows,
    }
    # Each suite's outcome column as wide as the longest badge its rows show (an outcome its
    # spec does not list, such as "environment_crash", included): no badge is cut.
    shown: dict[int, set[str]] = {}
    for row in rows:
        shown.setdefault(samples[row[0]][0], set()).add(str(row[3]))
    index["suites"] = [
        {**spec, "outcome_width": _outcome_width(spec["outcome_width"],
                                                 [*spec["outcomes"], *shown.get(place, ())])}
        for place, spec in enumerate(suites)]
    # Each row's outcome as a number into one list: 120,000 rows stay a few hundred kB.
    numbers: dict[str, int] = {}
    for row in rows:
        row[3] = numbers.setdefault(row[3], len(numbers))
    index["outcomes"] = list(numbers)
    return index, details


def _add_views(suite: int, number: int, views: Iterator[SampleView], samples: list[list[Any]],
               details: list[dict[str, Any]], rows: list[list[Any]],
               write_file: Callable[[str, Any], None] | None) -> None:
    places = {(s[1]): place for place, s in enumerate(samples) if s[0] == suite}
    for view in views:
        place = places.get(view.sample)
        if place is None:
            place = places[view.sample] = len(details)
            samples.append([suite, view.sample, *view.cells])
            details.append({"kind": "blocks", "sample": view.sample, "shared": view.shared,
                            "results": []})
        rows.append([place, number, view.sample_index, view.outcome])
        details[place]["results"].append({"evaluation": number, "sample": view.sample_index,
                                          "verdict": view.outcome, "blocks": view.result})
        if write_file is not None:
            for name, content in view.files.items():
                write_file(name, content)


def write_viewer(evaluations: list[Evaluation], folder: Path,
                 store: ArtifactStore | None = None, only: set[str] | None = None) -> Path:
    """Write the viewer into `folder` (replacing an earlier one); return its index.html.
    Images go to `media/`, each file once. `only`: just these samples (build_view)."""
    for name in ("data", "media"):
        if (folder / name).exists():
            shutil.rmtree(folder / name)
    data, media = folder / "data", folder / "media"
    data.mkdir(parents=True)
    written: set[str] = set()

    def write_file(name: str, content: Any) -> None:
        if name in written:
            return
        written.add(name)
        media.mkdir(exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, media / name)
        else:
            write_atomic(media / name, content)

    index, details = build_view(evaluations, store, write_file, only)
    for place, detail in enumerate(details):
        write_atomic(data / f"t{place}.js", (
            f"proactflowTrigger({place},{_script_json(detail)});\n").encode("utf-8"))
    page = folder / "index.html"
    write_atomic(page, PAGE.replace("/*INDEX*/null", _script_json(index)).encode("utf-8"))
    return page


def frame_summary(evaluations: list[Evaluation]) -> str:
    others = [e for e in evaluations if e.tables is None]
    evaluations = [e for e in evaluations if e.tables is not None]
    parts = []
    if evaluations:
        rows = sum(e.judgments.height for e in evaluations)
        triggers = pl.concat([e.triggers.select("unique_id_eval", "turn")
                              for e in evaluations]).unique().height
        parts.append(f"{len(evaluations)} evaluations, {triggers} triggers, {rows} verdicts")
    counts: dict[str, int] = {}
    for other in others:
        counts[other.suite.display_name] = counts.get(other.suite.display_name, 0) + 1
    parts += [f"{name}: {count} evaluations" for name, count in counts.items()]
    return "; ".join(parts)
