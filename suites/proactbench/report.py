"""ProactBench's part of `proactflow report`: the leaderboard with bootstrap intervals over
explicit evaluations, the upstream-shaped metrics of each, and its sections of the page (the
phase table and chart, the leaderboard, coverage, persona categories, judge agreement, the
triggers not scored).

Every row is one evaluation (a judgments artifact, results/evaluations.py): two prompts of one
judge, a smoke test beside the full run, or a run beside the imported published results are
separate rows with labels that say what differs. Rows scored on different trigger sets are
ranked only within their own set, and the page says so. An evaluation is any object with the
attributes of results/evaluations.py's Evaluation (this layer does not import it).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import polars as pl

from ...cache.artifacts import write_atomic, write_parquet_atomic
from ..declarations import ReportPart
from ..report_views import fold, incomplete_list, pivot_table, table_html, write_agreement
from .agreement import ORDER, judge_agreement
from .corpus import PHASES
from .exports import results_rows, upstream_metrics
from .leaderboard import OVERALL, build_leaderboard, with_rank_ranges
from .phase_scores import score_phases

PERCENT_COLUMNS = ("pass_rate", "weighted_score", "ci_low", "ci_high")


def coverage_line(evaluation: Any) -> str:
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


def _tagged(evaluation: Any) -> pl.DataFrame:
    return evaluation.tagged().with_columns(responses=pl.lit(evaluation.responses_key))


def _category_table(evaluations: list[Any]) -> pl.DataFrame:
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


def _trigger_sets_note(evaluations: list[Any]) -> str:
    sets = {e.trigger_set.key: e.trigger_set for e in evaluations if e.trigger_set}
    if len(sets) < 2:
        return ""
    items = "".join(f"<li><b>{html.escape(key)}</b>: {html.escape(s.describe())}</li>"
                    for key, s in sorted(sets.items()))
    return ("<p class='note'><b>These evaluations were scored on different trigger sets.</b> "
            "Rows are ranked only against rows of the same set (column trigger_set); scores "
            f"across sets are not comparable.</p><ul>{items}</ul>")


def evaluations_report(out: Path, evaluations: list[Any], *, names: dict[str, str],
                       incomplete: list[Any], samples: int, seed: int) -> ReportPart:
    """Writes leaderboard.csv/.parquet, metrics/<names[key]>.json per evaluation and, where two
    judges scored the same responses, agreement.csv and disagreements.csv in `out`; returns the
    page's pieces. `incomplete`: the evaluations left out as incomplete (listed, not ranked)."""
    tagged = pl.concat([_tagged(e) for e in evaluations], how="diagonal_relaxed")
    board = build_leaderboard(tagged, samples=samples, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "leaderboard.csv", board.write_csv().encode())
    write_parquet_atomic(out / "leaderboard.parquet", board)
    metrics_dir = out / "metrics"
    metrics_dir.mkdir(exist_ok=True)
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
    left_out = [coverage_line(e) for e in incomplete]
    ranked = with_rank_ranges(board).select(
        "rank", "label", "phase", "evaluated", "pass", "partial", "fail", "not_evaluated",
        *PERCENT_COLUMNS, "trigger_set", "source")
    intro = f"""<p class="note">Weighted score = (PASS + 0.5 PARTIAL) / evaluated. Intervals: 95 % bootstrap over
dialogues ({samples} resamples, seed {seed}). A rank such as 1-3 means the row's interval
overlaps others': those rows are not separable at this sample size. Each row is one evaluation;
where two share a model and judge, the label says what differs.</p>
{_trigger_sets_note(evaluations)}"""
    body = f"""<h2 id="proactbench">ProactBench: weighted score per phase</h2>
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
{f"<div class='wrap'>{table_html(failed)}</div>" if failed.height else "<p>None.</p>"}"""
    paths = {"leaderboard.csv": str(out / "leaderboard.csv"),
             "leaderboard.parquet": str(out / "leaderboard.parquet"),
             "report.html": str(out / "report.html"), "metrics": str(metrics_dir)}
    if not agreement.is_empty():
        paths.update({name: str(out / name) for name in ("agreement.csv", "disagreements.csv")})
    return ReportPart('<h2 id="proactbench">ProactBench</h2>', intro, body, board,
                      coverage, left_out, paths)


def bar_chart(board: pl.DataFrame) -> str:
    """Grouped bars (one group per phase, one bar per evaluation) with interval whiskers."""
    pairs = board.select("evaluation", "label").unique(maintain_order=True).rows()
    phases = list(PHASES) + [OVERALL]
    palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
               "#ff9da7", "#9c755f", "#bab0ac"]
    width, height, left, bottom, top = 760, 320, 48, 40, 16
    group = (width - left) / len(phases)
    bar = min(36.0, (group - 16) / max(1, len(pairs)))
    y = lambda value: top + (height - top - bottom) * (1 - value)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="weighted score per phase">']
    for tick in range(0, 101, 20):
        parts.append(f'<line x1="{left}" x2="{width}" y1="{y(tick / 100):.1f}" '
                     f'y2="{y(tick / 100):.1f}" stroke="#ddd"/>'
                     f'<text x="{left - 6}" y="{y(tick / 100) + 4:.1f}" text-anchor="end" '
                     f'font-size="11">{tick}%</text>')
    lookup = {(r["evaluation"], r["phase"]): r for r in board.to_dicts()}
    for g, phase in enumerate(phases):
        x0 = left + g * group + (group - bar * len(pairs)) / 2
        parts.append(f'<text x="{left + g * group + group / 2:.1f}" y="{height - bottom + 18}" '
                     f'text-anchor="middle" font-size="12">{phase.title()}</text>')
        for i, (key, label) in enumerate(pairs):
            row = lookup.get((key, phase))
            if not row or row["weighted_score"] is None:
                continue
            x = x0 + i * bar
            value = row["weighted_score"]
            title = html.escape(f"{label}: {value:.1%}")
            parts.append(f'<rect x="{x:.1f}" y="{y(value):.1f}" width="{bar - 3:.1f}" '
                         f'height="{y(0) - y(value):.1f}" fill="{palette[i % len(palette)]}">'
                         f'<title>{title}</title></rect>')
            if row["ci_low"] is not None:
                cx = x + (bar - 3) / 2
                parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(row["ci_low"]):.1f}" '
                             f'y2="{y(row["ci_high"]):.1f}" stroke="#222" stroke-width="1.5"/>')
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><i style="background:{palette[i % len(palette)]}"></i>'
        f'{html.escape(label)}</span>'
        for i, (_, label) in enumerate(pairs))
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def agreement_section(table: pl.DataFrame, disagreements: pl.DataFrame) -> str:
    if table.is_empty():
        return ""
    matrices = []
    for row in table.filter(pl.col("phase") == "OVERALL").iter_rows(named=True):
        head = "".join(f"<th>{html.escape(row['label_b'])}: {s}</th>" for s in ORDER)
        body = "".join(
            f"<tr><td>{html.escape(row['label_a'])}: {score}</td>"
            + "".join(f"<td>{n}</td>" for n in counts) + "</tr>"
            for score, counts in zip(ORDER, row["confusion"]))
        matrices.append(f"<p>{html.escape(row['model'])}</p><table><thead><tr><th></th>{head}"
                        f"</tr></thead><tbody>{body}</tbody></table>")
    return ("<h2>Judge agreement</h2>"
            + table_html(table.drop("confusion", "evaluation_a", "evaluation_b"),
                         ("percent_agreement",)) +
            f"<h2>Confusion matrices (all phases)</h2>{''.join(matrices)}"
            f"<h2>Disagreements ({disagreements.height})</h2>"
            + (f"<div class='wrap'>{table_html(disagreements)}</div>" if disagreements.height
               else "<p>None.</p>"))
