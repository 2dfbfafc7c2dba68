"""`proactflow report`: a leaderboard with bootstrap intervals over explicit evaluations, the
upstream-shaped metrics of each, and a self-contained HTML page.

Every row is one evaluation (a judgments artifact, see evaluations.py): two prompts of one judge,
a smoke test beside the full run, or a run beside the imported published results are separate
rows with labels that say what differs. Rows scored on different trigger sets are ranked only
within their own set, and the page says so.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl

from ..cache.artifacts import ArtifactStore, write_atomic, write_parquet_atomic
from ..common.errors import UserError
from .evaluations import Evaluation, distinguish, file_names, stored_evaluations
from .suite_evaluations import SuiteEvaluation, suite_evaluations
from .viewer import write_viewer
from ..suites.proactbench.exports import results_rows, upstream_metrics
from .report_html import STYLE, agreement_section, bar_chart, table_html
from ..suites.proactbench.corpus import PHASES
from ..suites.proactbench.leaderboard import OVERALL
from ..suites.report_views import fold, incomplete_list, incomplete_lines, pivot_table
from ..suites.proactbench.agreement import judge_agreement
from ..suites.proactbench.leaderboard import build_leaderboard, with_rank_ranges
from ..suites.proactbench.phase_scores import score_phases

PERCENT_COLUMNS = ("pass_rate", "weighted_score", "ci_low", "ci_high")


def coverage_line(evaluation: Evaluation) -> str:
    """How many triggers an evaluation actually scored, on which trigger set, and why not the
    rest."""
    counts = evaluation.judgments["status"].value_counts()
    by_status = dict(zip(counts["status"].to_list(), counts["count"].to_list()))
    total = evaluation.judgments.height
    scored = by_status.pop("scored", 0)
    reasons = ", ".join(f"{status} {n}" for status, n in sorted(by_status.items()))
    where = f", {evaluation.trigger_set.describe()}" if evaluation.trigger_set else ""
    return (f"{evaluation.label or evaluation.base_label}: scored {scored} of {total} triggers"
            + (f" (not evaluated: {reasons})" if reasons else "")
            + f" [{evaluation.source}{where}]")


def _tagged(evaluation: Evaluation) -> pl.DataFrame:
    return evaluation.tagged().with_columns(responses=pl.lit(evaluation.responses_key))


def _category_table(evaluations: list[Evaluation]) -> pl.DataFrame:
    frames = [_tagged(e).join(e.triggers.select("unique_id_eval", "turn", "category_key"),
                              on=["unique_id_eval", "turn"], how="left") for e in evaluations]
    scored = pl.col("status") == "scored"
    return (pl.concat(frames, how="diagonal_relaxed")
            .group_by("label", "category_key")
            .agg(evaluated=scored.sum(),
                 credit=(scored & (pl.col("score") == "PASS")).sum()
                 + 0.5 * (scored & (pl.col("score") == "PARTIAL")).sum())
            .with_columns(weighted_score=pl.when(pl.col("evaluated") > 0)
                          .then(pl.col("credit") / pl.col("evaluated")))
            .sort("category_key", "label"))


def write_agreement(out: Path, table: pl.DataFrame, disagreements: pl.DataFrame) -> None:
    """agreement.csv (confusion matrices as JSON text) and disagreements.csv."""
    flat = table.with_columns(pl.Series("confusion", [json.dumps(m) for m in
                                                      table["confusion"].to_list()],
                                        dtype=pl.String))
    write_atomic(out / "agreement.csv", flat.write_csv().encode())
    write_atomic(out / "disagreements.csv", disagreements.write_csv().encode())


def _trigger_sets_note(evaluations: list[Evaluation]) -> str:
    sets = {e.trigger_set.key: e.trigger_set for e in evaluations if e.trigger_set}
    if len(sets) < 2:
        return ""
    items = "".join(f"<li><b>{html.escape(key)}</b>: {html.escape(s.describe())}</li>"
                    for key, s in sorted(sets.items()))
    return ("<p class='note'><b>These evaluations were scored on different trigger sets.</b> "
            "Rows are ranked only against rows of the same set (column trigger_set); scores "
            f"across sets are not comparable.</p><ul>{items}</ul>")


def _incomplete_proactbench(store: ArtifactStore, shown: list[Evaluation],
                            include_incomplete: bool) -> list[str]:
    """A coverage line of each incomplete ProactBench evaluation left out of the report."""
    if include_incomplete:
        return []
    keys = {e.key for e in shown}
    found = stored_evaluations(store, include_incomplete=True)
    return [coverage_line(e) for e in found if not e.complete and e.key not in keys]


def _suite_files(out: Path, store: ArtifactStore,
                 sections: dict[str, tuple[str, pl.DataFrame] | None],
                 others: list[SuiteEvaluation], include_incomplete: bool
                 ) -> tuple[dict[str, str], list[str], list[str]]:
    """For the console to name every file written and every evaluation reported or not: the
    leaderboard CSV each other suite's section wrote (one where it shows an evaluation), a line
    per evaluation it shows, and a line per evaluation of each suite left out as incomplete."""
    from ..suites import get_suite

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
                 include_incomplete: bool = False,
                 others: list[SuiteEvaluation] | None = None) -> dict[str, Any]:
    """Leaderboard, metrics and report.html over ProactBench's `evaluations` (default: every
    complete evaluation in the store), with a section per other suite found in the store over
    `others` (default: all of its complete evaluations; `published`: a folder of Proactive
    Agent's published results files)."""
    from ..suites import get_suite, suite_names

    evaluations = stored_evaluations(store) if evaluations is None else distinguish(evaluations)
    chosen = others is not None
    if others is None:
        others = suite_evaluations(store, include_incomplete=include_incomplete) \
            if other_suites else []
    out.mkdir(parents=True, exist_ok=True)

    def keys(suite: str) -> list[str] | None:
        """A selection's evaluations of `suite` (None: every one in the store)."""
        return [e.key for e in others or [] if e.suite.name == suite] if chosen else None

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
        written["paths"]["viewer"] = str(write_viewer([], out / "viewer", others, store))
        written["coverage"] = suite_files[1]
        written["left_out"] = suite_files[2]
        return written
    tagged = pl.concat([_tagged(e) for e in evaluations], how="diagonal_relaxed")
    board = build_leaderboard(tagged, samples=samples, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "leaderboard.csv", board.write_csv().encode())
    write_parquet_atomic(out / "leaderboard.parquet", board)
    metrics_dir = out / "metrics"
    metrics_dir.mkdir(exist_ok=True)
    names = file_names(evaluations)
    coverage = []
    for e in evaluations:
        results = results_rows(e.triggers, e.responses, e.judgments)
        metrics = upstream_metrics(results, score_phases(e.judgments), e.judgments, e.responses)
        metrics["proactflow"].update({
            "model": e.model, "judge": e.judge, "judge_prompt_sha256": e.judge_prompt_sha256,
            "evaluation": e.key, "label": e.label, "source": e.source,
            "trigger_set": asdict(e.trigger_set) if e.trigger_set else None})
        write_atomic(metrics_dir / f"{names[e.key]}.json",
                     (json.dumps(metrics, indent=2, ensure_ascii=False) + "\n").encode())
        coverage.append(coverage_line(e))
    failed = tagged.filter(pl.col("status") != "scored").select(
        "label", "unique_id_eval", "turn", "phase", "status", "message")
    categories = _category_table(evaluations)
    agreement, disagreements = judge_agreement(tagged)
    if not agreement.is_empty():
        write_agreement(out, agreement, disagreements)
    left_out = _incomplete_proactbench(store, evaluations, include_incomplete)
    ranked = with_rank_ranges(board).select(
        "rank", "label", "phase", "evaluated", "pass", "partial", "fail", "not_evaluated",
        *PERCENT_COLUMNS, "trigger_set", "source")
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>{"Proactivity report" if other else "ProactBench report"}</title>
<style>{STYLE}</style></head><body>
<h1>{"Proactivity report" if other else "ProactBench proactivity report"}</h1>
{_contents('<h2 id="proactbench">ProactBench</h2>' + (other[0] if other else ""))}
<p class="note">Weighted score = (PASS + 0.5 PARTIAL) / evaluated. Intervals: 95 % bootstrap over
dialogues ({samples} resamples, seed {seed}). A rank such as 1-3 means the row's interval
overlaps others': those rows are not separable at this sample size. Each row is one evaluation;
where two share a model and judge, the label says what differs.</p>
{_trigger_sets_note(evaluations)}
{_viewer_link(bool(others))}
<h2 id="proactbench">ProactBench: weighted score per phase</h2>
{pivot_table(board.filter(pl.col("phase").is_not_null()), suite="proactbench", group="phase",
             value="weighted_score", low="ci_low", high="ci_high", scale=100,
             groups=(*PHASES, OVERALL))}
{bar_chart(board)}
<h2 id="proactbench-leaderboard">Leaderboard</h2>
{fold("Every column: counts, pass rate, rank ranges, trigger set",
      table_html(ranked, PERCENT_COLUMNS))}
{incomplete_list(left_out)}
<h2>Coverage</h2><ul>{''.join(f"<li>{html.escape(line)}</li>" for line in coverage)}</ul>
<h2>By persona category</h2>{table_html(categories, ("weighted_score",))}
{agreement_section(agreement, disagreements)}
<h2 id="failed">Triggers not scored ({failed.height})</h2>
{f"<div class='wrap'>{table_html(failed)}</div>" if failed.height else "<p>None.</p>"}
{other[0] if other else ""}
</body></html>"""
    write_atomic(out / "report.html", page.encode("utf-8"))
    viewer = write_viewer(evaluations, out / "viewer", others, store)
    paths = {"leaderboard.csv": str(out / "leaderboard.csv"),
             "leaderboard.parquet": str(out / "leaderboard.parquet"),
             "report.html": str(out / "report.html"), "metrics": str(metrics_dir)}
    if not agreement.is_empty():
        paths.update({name: str(out / name) for name in ("agreement.csv", "disagreements.csv")})
    return {"leaderboard": board, "coverage": coverage + suite_files[1],
            "paths": {**paths, **suite_files[0], "viewer": str(viewer)},
            "left_out": [f"ProactBench: {line}" for line in left_out] + suite_files[2]}
