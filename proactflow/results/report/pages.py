"""`proactflow report`: a leaderboard with bootstrap intervals over explicit evaluations, the
upstream-shaped metrics of each, and a self-contained HTML page.

Every row is one evaluation (a judgments artifact, see evaluations.py): two prompts of one judge,
a smoke test beside the full run, or a run beside the imported published results are separate
rows with labels that say what differs. Rows scored on different trigger sets are ranked only
within their own set, and the page says so.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import polars as pl

from ...cache.artifacts import ArtifactStore, write_atomic
from ...common.errors import UserError
from ...suites.report_views import incomplete_lines
from ..evaluation import Evaluation
from ..evaluations import distinguish, file_names, stored_evaluations
from .html import STYLE
from ..suite_evaluations import suite_evaluations
from ..viewer.site import write_viewer

def _incomplete(store: ArtifactStore, shown: list[Evaluation],
                include_incomplete: bool) -> list[Evaluation]:
    """The incomplete evaluations read with their samples left out of the report."""
    if include_incomplete:
        return []
    keys = {e.key for e in shown}
    found = stored_evaluations(store, include_incomplete=True)
    return [e for e in found if not e.complete and e.key not in keys]


def _suite_files(out: Path, store: ArtifactStore,
                 sections: dict[str, tuple[str, pl.DataFrame] | None],
                 others: list[Evaluation], include_incomplete: bool
                 ) -> tuple[dict[str, str], list[str], list[str]]:
    """For the console to name every file written and every evaluation reported or not: the
    leaderboard CSV each other suite's section wrote (one where it shows an evaluation), a line
    per evaluation it shows, and a line per evaluation of each suite left out as incomplete."""
    from ...suites import get_suite

    paths: dict[str, str] = {}
    reported: list[str] = []
    left_out: list[str] = []
    for name, section in sections.items():
        suite = get_suite(name)
        board = section[1] if section is not None else pl.DataFrame()
        shown = board["evaluation"].unique().to_list() if "evaluation" in board.columns else []
        if not board.is_empty():
            csv = out / f"{name.replace('-', '_')}_leaderboard.csv"
            paths[csv.name] = str(csv)
        reported += [f"{suite.display_name}: {e.label or e.base_label}" for e in others
                     if e.suite.name == name and e.key in shown]
        if not include_incomplete:
            left_out += [f"{suite.display_name}: {line}"
                         for line in incomplete_lines(suite, store, shown)]
    return paths, reported, left_out


def _contents(body: str) -> str:
    """Links to each suite's section (its <h2 id>) and each variant's (<h3 id>)."""
    import re

    found = re.findall(r'<h([23]) id="([^"]+)">(.*?)</h[23]>', body)
    items = "".join(f'<li class="h{level}"><a href="#{anchor}">{re.sub("<[^>]+>", "", text)}'
                    f"</a></li>" for level, anchor, text in found)
    return f"<nav><ul class='contents'>{items}</ul></nav>" if len(found) > 1 else ""


def _viewer_link(other_suites: bool) -> str:
    return ('<p><a href="viewer/index.html">Open the per-sample viewer</a>: '
            + ("every suite's samples (what each model saw, said and scored), "
               if other_suites else "each trigger's context, rubric, responses and verdicts, ")
            + "models or judges side by side.</p>")


def write_suite_page(out: Path, title: str, body: str, board: pl.DataFrame) -> dict[str, Any]:
    """report.html holding one suite's section (a suite without ProactBench's report)."""
    out.mkdir(parents=True, exist_ok=True)
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>{body}</body></html>"""
    write_atomic(out / "report.html", page.encode("utf-8"))
    return {"leaderboard": board, "coverage": [], "paths": {
        "report.html": str(out / "report.html")}}


def write_report(store: ArtifactStore, out: Path, *, samples: int = 1000, seed: int = 0,
                 evaluations: list[Evaluation] | None = None,
                 published: Path | None = None, other_suites: bool = True,
                 include_incomplete: bool = False, selected: bool = False) -> dict[str, Any]:
    """Leaderboard, metrics and report.html over `evaluations` of every suite (default: every
    complete evaluation read with its triggers, and every evaluation of the other suites found
    in the store, complete unless `include_incomplete`): the report of those read with their
    triggers, and a section per other suite. A section covers its suite's evaluations in the
    store, or with `selected` (a selection was made) just those of `evaluations`. `published`:
    a folder of Proactive Agent's published results files."""
    from ...suites import get_suite, suite_names

    if evaluations is None:
        evaluations = stored_evaluations(store) + (suite_evaluations(
            store, include_incomplete=include_incomplete) if other_suites else [])
    others = [e for e in evaluations if e.tables is None] if other_suites else []
    evaluations = distinguish([e for e in evaluations if e.tables is not None])
    out.mkdir(parents=True, exist_ok=True)

    def keys(suite: str) -> list[str] | None:
        """A selection's evaluations of `suite` (None: every one in the store)."""
        return [e.key for e in others if e.suite.name == suite] if selected else None

    sectioned = [suite for suite in map(get_suite, suite_names()) if suite.reports_section]
    wanted = {suite.name: keys(suite.name) for suite in sectioned}
    found = [suite.report_section(store, out, keys=wanted[suite.name],
                                  include_incomplete=include_incomplete, published=published)
             if wanted[suite.name] != [] else None for suite in sectioned] if other_suites else []
    sections = [section for section in found if section is not None]
    suite_files = _suite_files(out, store, dict(zip(wanted, found)), others,
                               include_incomplete) if other_suites else ({}, [], [])
    other = ("\n".join(body for body, _ in sections),
             pl.concat([board for _, board in sections], how="diagonal_relaxed")) \
        if sections else None
    if not evaluations:
        if other is None:
            raise UserError(f"no complete evaluations in {store.url} for this selection: run "
                            "'proactflow run' or 'proactflow import' first, or see "
                            "'proactflow report --help' for the selection options")
        written = write_suite_page(out, "Proactivity report",
                                   _contents(other[0]) + _viewer_link(True) + other[0], other[1])
        written["paths"].update(suite_files[0])
        written["paths"]["viewer"] = str(write_viewer(others, out / "viewer", store))
        written["coverage"] = suite_files[1]
        written["left_out"] = suite_files[2]
        return written
    suite = evaluations[0].suite
    part = suite.evaluations_report(
        out, evaluations, names=file_names(evaluations),
        incomplete=_incomplete(store, evaluations, include_incomplete), samples=samples,
        seed=seed)
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{"Proactivity report" if other else f"{suite.display_name} report"}</title>
<style>{STYLE}</style></head><body>
<h1>{"Proactivity report" if other else f"{suite.display_name} proactivity report"}</h1>
{_contents(part.contents + (other[0] if other else ""))}
{part.intro}
{_viewer_link(bool(others))}
{part.body}
{other[0] if other else ""}
</body></html>"""
    write_atomic(out / "report.html", page.encode("utf-8"))
    viewer = write_viewer([*evaluations, *others], out / "viewer", store)
    return {"leaderboard": part.board, "coverage": part.coverage + suite_files[1],
            "paths": {**part.paths, **suite_files[0], "viewer": str(viewer)},
            "left_out": [f"{suite.display_name}: {line}" for line in part.left_out]
            + suite_files[2]}
