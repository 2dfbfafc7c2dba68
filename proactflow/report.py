"""`proactflow report`: a leaderboard with bootstrap intervals over everything in a store, the
upstream-shaped metrics of every (model, judge), and a self-contained HTML page."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from .cache.artifacts import ArtifactStore, write_atomic, write_parquet_atomic
from .errors import UserError
from .exports import results_rows, upstream_metrics
from .schemas.corpus import PHASES
from .stages.agreement import ORDER, judge_agreement
from .stages.leaderboard import OVERALL, build_leaderboard, with_rank_ranges
from .stages.phase_scores import score_phases


@dataclass(frozen=True)
class Evaluation:
    """The latest judgments of one (model, judge, judge prompt) with their inputs."""

    model: str
    judge: str
    judge_prompt_sha256: str
    triggers: pl.DataFrame
    responses: pl.DataFrame
    judgments: pl.DataFrame


def _inputs_of(store: ArtifactStore, judgments_path: Path) -> tuple[Path, Path] | None:
    """(responses, triggers) artifact paths behind a judgments artifact, if both are stored."""
    responses_key = store.key_material(judgments_path).get("inputs", {}).get("responses")
    responses_path = store.path_for("responses", responses_key or "")
    if not responses_path.exists():
        return None
    triggers_key = store.key_material(responses_path).get("inputs", {}).get("triggers")
    triggers_path = store.path_for("triggers", triggers_key or "")
    return (responses_path, triggers_path) if triggers_path.exists() else None


def evaluation_of(store: ArtifactStore, judgments_path: Path) -> Evaluation | None:
    """The evaluation a judgments artifact belongs to, with its inputs; None if incomplete."""
    inputs = _inputs_of(store, judgments_path)
    judgments = pl.read_parquet(judgments_path)
    if inputs is None or judgments.is_empty():
        return None
    model, judge, sha = judgments.select("model", "judge", "judge_prompt_sha256").row(0)
    return Evaluation(model, judge, sha, pl.read_parquet(inputs[1]), pl.read_parquet(inputs[0]),
                      judgments)


def stored_evaluations(store: ArtifactStore) -> list[Evaluation]:
    """Every (model, judge, prompt) judged in the store; the newest artifact wins."""
    latest: dict[tuple[str, str, str], tuple[float, Path]] = {}
    for path in sorted((store.root / "artifacts" / "judgments").glob("*.parquet")):
        if _inputs_of(store, path) is None:
            continue
        head = pl.read_parquet(path, columns=["model", "judge", "judge_prompt_sha256"], n_rows=1)
        if head.is_empty():
            continue
        identity = tuple(head.row(0))
        stamp = path.stat().st_mtime
        if identity not in latest or latest[identity][0] < stamp:
            latest[identity] = (stamp, path)
    found = (evaluation_of(store, path) for _, (_, path) in sorted(latest.items()))
    return [e for e in found if e is not None]


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "model"


def coverage_line(evaluation: Evaluation) -> str:
    """How many of the corpus's triggers a (model, judge) actually scored, and why not the rest."""
    counts = evaluation.judgments["status"].value_counts()
    by_status = dict(zip(counts["status"].to_list(), counts["count"].to_list()))
    total = evaluation.judgments.height
    scored = by_status.pop("scored", 0)
    reasons = ", ".join(f"{status} {n}" for status, n in sorted(by_status.items()))
    return (f"{evaluation.model} judged by {evaluation.judge}: scored {scored} of {total} "
            f"triggers" + (f" (not evaluated: {reasons})" if reasons else ""))


def _category_table(evaluations: list[Evaluation]) -> pl.DataFrame:
    frames = []
    for e in evaluations:
        frames.append(e.judgments.join(
            e.triggers.select("unique_id_eval", "turn", "category_key"),
            on=["unique_id_eval", "turn"], how="left"))
    scored = pl.col("status") == "scored"
    return (pl.concat(frames)
            .group_by("model", "judge", "category_key")
            .agg(evaluated=scored.sum(),
                 credit=(scored & (pl.col("score") == "PASS")).sum()
                 + 0.5 * (scored & (pl.col("score") == "PARTIAL")).sum())
            .with_columns(weighted_score=pl.when(pl.col("evaluated") > 0)
                          .then(pl.col("credit") / pl.col("evaluated")))
            .sort("category_key", "model", "judge"))


def _bar_chart(board: pl.DataFrame) -> str:
    """Grouped bars (one group per phase, one bar per model/judge) with interval whiskers."""
    pairs = board.select("model", "judge").unique(maintain_order=True).rows()
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
    lookup = {(r["model"], r["judge"], r["phase"]): r for r in board.to_dicts()}
    for g, phase in enumerate(phases):
        x0 = left + g * group + (group - bar * len(pairs)) / 2
        parts.append(f'<text x="{left + g * group + group / 2:.1f}" y="{height - bottom + 18}" '
                     f'text-anchor="middle" font-size="12">{phase.title()}</text>')
        for i, (model, judge) in enumerate(pairs):
            row = lookup.get((model, judge, phase))
            if not row or row["weighted_score"] is None:
                continue
            x = x0 + i * bar
            value = row["weighted_score"]
            title = html.escape(f"{model} / {judge}: {value:.1%}")
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
        f'{html.escape(model)} / {html.escape(judge)}</span>'
        for i, (model, judge) in enumerate(pairs))
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def _table(frame: pl.DataFrame, percent: tuple[str, ...] = ()) -> str:
    head = "".join(f"<th>{html.escape(c)}{' %' if c in percent else ''}</th>"
                   for c in frame.columns)
    body = []
    for row in frame.iter_rows(named=True):
        cells = []
        for column, value in row.items():
            if value is None:
                text = "–"
            elif column in percent:
                text = f"{100 * value:.1f}"
            else:
                text = str(value)
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<div class='scroll'><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1180px;
color:#222;padding:0 1rem}h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0}
th,td{padding:.25rem .5rem;
white-space:nowrap;
border-bottom:1px solid #e5e5e5;text-align:right}
th:nth-child(-n+4),td:nth-child(-n+4){text-align:left}thead th{background:#f6f6f6}
.wrap td{white-space:normal;text-align:left;vertical-align:top;min-width:5rem}
.legend{font-size:.8rem;margin:.3rem 0 0 48px}.key{margin-right:1rem}.key i{display:inline-block;
width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px}.note{color:#666;font-size:.85rem}
"""


def write_agreement(out: Path, table: pl.DataFrame, disagreements: pl.DataFrame) -> None:
    """agreement.csv (confusion matrices as JSON text) and disagreements.csv."""
    flat = table.with_columns(pl.Series("confusion", [json.dumps(m) for m in
                                                      table["confusion"].to_list()],
                                        dtype=pl.String))
    write_atomic(out / "agreement.csv", flat.write_csv().encode())
    write_atomic(out / "disagreements.csv", disagreements.write_csv().encode())


def _agreement_section(table: pl.DataFrame, disagreements: pl.DataFrame) -> str:
    if table.is_empty():
        return ""
    matrices = []
    for row in table.filter(pl.col("phase") == "OVERALL").iter_rows(named=True):
        head = "".join(f"<th>{html.escape(row['judge_b'])}: {s}</th>" for s in ORDER)
        body = "".join(
            f"<tr><td>{html.escape(row['judge_a'])}: {score}</td>"
            + "".join(f"<td>{n}</td>" for n in counts) + "</tr>"
            for score, counts in zip(ORDER, row["confusion"]))
        matrices.append(f"<p>{html.escape(row['model'])}</p><table><thead><tr><th></th>{head}"
                        f"</tr></thead><tbody>{body}</tbody></table>")
    return (f"<h2>Judge agreement</h2>"
            f"{_table(table.drop('confusion'), ('percent_agreement',))}"
            f"<h2>Confusion matrices (all phases)</h2>{''.join(matrices)}"
            f"<h2>Disagreements ({disagreements.height})</h2>"
            + (f"<div class='wrap'>{_table(disagreements)}</div>" if disagreements.height
               else "<p>None.</p>"))


def write_report(store: ArtifactStore, out: Path, *, samples: int = 1000, seed: int = 0,
                 evaluations: list[Evaluation] | None = None) -> dict[str, Any]:
    """Leaderboard, metrics and report.html over `evaluations` (default: all in the store)."""
    evaluations = stored_evaluations(store) if evaluations is None else evaluations
    if not evaluations:
        raise UserError(f"no judgments in {store.root}: run 'proactflow run' or "
                        "'proactflow import' first")
    board = build_leaderboard(pl.concat([e.judgments for e in evaluations]),
                              samples=samples, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "leaderboard.csv", board.write_csv().encode())
    write_parquet_atomic(out / "leaderboard.parquet", board)
    metrics_dir = out / "metrics"
    metrics_dir.mkdir(exist_ok=True)
    coverage = []
    for e in evaluations:
        results = results_rows(e.triggers, e.responses, e.judgments)
        metrics = upstream_metrics(results, score_phases(e.judgments))
        metrics["proactflow"].update({"model": e.model, "judge": e.judge,
                                      "judge_prompt_sha256": e.judge_prompt_sha256})
        name = f"{safe_name(e.model)}__{safe_name(e.judge)}.json"
        write_atomic(metrics_dir / name,
                     (json.dumps(metrics, indent=2, ensure_ascii=False) + "\n").encode())
        coverage.append(coverage_line(e))
    failed = pl.concat([e.judgments for e in evaluations]).filter(
        ~pl.col("status").is_in(["scored"])).select(
        "model", "judge", "unique_id_eval", "turn", "phase", "status", "message")
    categories = _category_table(evaluations)
    agreement, disagreements = judge_agreement(pl.concat([e.judgments for e in evaluations]))
    if not agreement.is_empty():
        write_agreement(out, agreement, disagreements)
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>ProactBench report</title><style>{_STYLE}</style></head><body>
<h1>ProactBench proactivity report</h1>
<p class="note">Weighted score = (PASS + 0.5 PARTIAL) / evaluated. Intervals: 95 % bootstrap over
dialogues ({samples} resamples, seed {seed}). A rank such as 1-3 means the row's interval
overlaps others': those rows are not separable at this sample size.</p>
<h2>Weighted score per phase</h2>{_bar_chart(board)}
<h2>Leaderboard</h2>{_table(with_rank_ranges(board).select("rank", *board.columns),
                            ("pass_rate", "weighted_score", "ci_low", "ci_high"))}
<h2>Coverage</h2><ul>{''.join(f"<li>{html.escape(line)}</li>" for line in coverage)}</ul>
<h2>By persona category</h2>{_table(categories, ("weighted_score",))}
{_agreement_section(agreement, disagreements)}
<h2 id="failed">Triggers not scored ({failed.height})</h2>
{_table(failed) if failed.height else "<p>None.</p>"}
</body></html>"""
    write_atomic(out / "report.html", page.encode("utf-8"))
    return {"leaderboard": board, "coverage": coverage, "paths": {
        "leaderboard.csv": str(out / "leaderboard.csv"), "report.html": str(out / "report.html"),
        "metrics": str(metrics_dir)}}
