"""`history.csv` and `history.html`: the score of each (model, judge) over nights.

The page is self-contained (inline SVG, no script): a chart per suite and group, one line per
(model, judge) with its 95 % interval as a band, a point per night labelled where the revision
or the served snapshot changed, a dashed mark where the judge changed (scores on either side are
not comparable), the findings at the top, and each night's report and viewer linked.
"""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from ...cache.artifacts import write_atomic
from .scores import Finding
from ..report.html import STYLE

CHARTS = ".charts{display:flex;flex-wrap:wrap;gap:0 1.5rem}details{font-size:.8rem}"
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac"]
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 270, 48, 70, 16, 50
LABEL_WIDTH = 64
"""The room an axis label (date over time) takes: labels closer than that are thinned."""


def _chart(part: pl.DataFrame, nights: list[str]) -> str:
    step = (WIDTH - LEFT - RIGHT) / max(1, len(nights) - 1)
    x = {night: LEFT + (i * step if len(nights) > 1 else (WIDTH - LEFT - RIGHT) / 2)
         for i, night in enumerate(nights)}
    y = lambda value: TOP + (HEIGHT - TOP - BOTTOM) * (1 - value)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             'role="img" aria-label="score over nights">']
    for tick in range(0, 101, 20):
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick / 100):.1f}" '
                     f'y2="{y(tick / 100):.1f}" stroke="#eee"/><text x="{LEFT - 6}" '
                     f'y="{y(tick / 100) + 4:.1f}" text-anchor="end" font-size="11">{tick}%'
                     '</text>')
    # Date over time, so that two nights of one day stand apart; where the nights are too
    # dense for every label, every n-th is written, each night keeping its tick.
    stride = max(1, -(-LABEL_WIDTH // max(1, int(step)))) if len(nights) > 1 else 1
    for i, night in enumerate(nights):
        parts.append(f'<line x1="{x[night]:.1f}" x2="{x[night]:.1f}" y1="{HEIGHT - BOTTOM}" '
                     f'y2="{HEIGHT - BOTTOM + 4}" stroke="#999"/>')
        if i % stride:
            continue
        parts.append(f'<text x="{x[night]:.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle" '
                     f'font-size="11">{html.escape(night[:10])}<tspan x="{x[night]:.1f}" '
                     f'dy="13">{html.escape(night[11:16])}</tspan></text>')
    lines = part.select("model", "judge").unique(maintain_order=True).rows()
    legend = []
    for i, (model, judge) in enumerate(lines):
        colour = PALETTE[i % len(PALETTE)]
        rows = part.filter((pl.col("model") == model) & (pl.col("judge") == judge)
                           & pl.col("score").is_not_null()).sort("night").to_dicts()
        banded = [r for r in rows if r["ci_low"] is not None]
        if banded:
            upper = [f"{x[r['night']]:.1f},{y(r['ci_high']):.1f}" for r in banded]
            lower = [f"{x[r['night']]:.1f},{y(r['ci_low']):.1f}" for r in reversed(banded)]
            parts.append(f'<polygon points="{" ".join(upper + lower)}" fill="{colour}" '
                         'fill-opacity="0.18" stroke="none"/>')
        path = " ".join(f"{x[r['night']]:.1f},{y(r['score']):.1f}" for r in rows)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                     'stroke-width="2"/>')
        label = None
        for r in rows:
            cx, cy = x[r["night"]], y(r["score"])
            if r["judge_changed"]:
                parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{TOP}" '
                             f'y2="{HEIGHT - BOTTOM}" stroke="#999" stroke-dasharray="4 3">'
                             '<title>the judge changed: not comparable with the night '
                             'before</title></line>')
            tip = html.escape(f"{r['night'][:16]} {r['point']}: {100 * r['score']:.1f} "
                              + (f"[{100 * r['ci_low']:.1f}, {100 * r['ci_high']:.1f}]"
                                 if r["ci_low"] is not None else ""))
            parts.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}">'
                         f'<title>{tip}</title></circle>')
            if r["point"] != label:
                right = cx > (LEFT + WIDTH - RIGHT) / 2  # a label to the left: not cut off
                parts.append(f'<text x="{cx - 5 if right else cx + 5:.1f}" y="{cy - 7:.1f}" '
                             f'text-anchor="{"end" if right else "start"}" font-size="10" '
                             f'fill="{colour}">{html.escape(r["point"])}</text>')
                label = r["point"]
        legend.append(f'<span class="key"><i style="background:{colour}"></i>'
                      f'{html.escape(model)} judged by {html.escape(judge)}</span>')
    parts.append("</svg>")
    return ("".join(parts) + f'<div class="legend">{"".join(legend)}</div>'
            + _numbers(part))


def _numbers(part: pl.DataFrame) -> str:
    """The chart's figures as a table under it: a reader can read them, a screen reader too."""
    rows = []
    shown = part.filter(pl.col("model").is_not_null())  # a night set aside has no figure
    for r in shown.sort("night", "model", "judge").to_dicts():
        interval = (f"{100 * r['ci_low']:.1f} – {100 * r['ci_high']:.1f}"
                    if r["ci_low"] is not None and r["ci_high"] is not None else "–")
        cells = [r["night"][:16].replace("T", " "), f"{r['model']} judged by {r['judge']}",
                 f"{100 * r['score']:.1f}" if r["score"] is not None else "–", interval,
                 str(r["point"] or "")]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    return ("<details><summary>the chart's numbers</summary><table><thead><tr><th>night</th>"
            "<th>model</th><th>score %</th><th>95 % interval</th><th>point</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></details>")


def _findings(findings: list[Finding]) -> str:
    if not findings:
        return "<p>No regression or improvement beyond noise between consecutive nights.</p>"
    items = []
    for f in findings:
        links = " ".join(f'<a href="{html.escape(str(url))}">{name.replace("_", " ")}</a>'
                         for name, url in f.links.items() if url)
        changed = "".join(
            "<li>" + (f'<a href="{html.escape(c["view"])}">{html.escape(c["sample"])}</a>'
                      if c.get("view") else html.escape(c["sample"]))
            + f": {html.escape(str(c['before']))} → {html.escape(str(c['after']))}</li>"
            for c in f.changed)
        items.append(f"<li><b>{html.escape(f.line())}</b> {links}<details><summary>the "
                     f"{len(f.changed)} samples that changed verdict</summary><ul>{changed}"
                     "</ul></details></li>")
    return f"<ul>{''.join(items)}</ul>"


def _nights_table(table: pl.DataFrame) -> str:
    nights = table.select("series", "night", "report", "viewer", "set_aside", "gap").unique(
        maintain_order=True).sort("night")
    rows = []
    for series, night, report, viewer, set_aside, gap in nights.rows():
        cells = [html.escape(night[:16].replace("T", " ")), html.escape(series),
                 f'<a href="{html.escape(report)}">report</a>' if report else "–",
                 f'<a href="{html.escape(viewer)}">viewer</a>' if viewer else "–",
                 f"{html.escape(gap or 'set aside')}: {html.escape(set_aside)}"
                 if set_aside else ""]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return ("<table><thead><tr><th>night</th><th>series</th><th>report</th><th>viewer</th>"
            f"<th>note</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def write_history(out: Path, table: pl.DataFrame, findings: list[Finding]) -> dict[str, str]:
    """history.csv and history.html in `out`; returns name -> path."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "history.csv", table.write_csv().encode())
    sections = []
    nights = sorted(set(table["night"].to_list()))
    overall = pl.col("group").str.to_lowercase().is_in(["overall", "all"])
    ordered = table.filter(pl.col("set_aside").is_null()).with_columns(
        first=~overall).sort("suite", "variant", "first", "group")
    for (suite, variant, group, metric), part in ordered.group_by(
            "suite", "variant", "group", "metric", maintain_order=True):
        title = " ".join(str(name) for name in (suite, variant) if name)
        sections.append(f"<div class='chart'><h2>{html.escape(title)}: "
                        f"{html.escape(str(group))} <small>({html.escape(str(metric))})"
                        "</small></h2>"
                        + _chart(part, [n for n in nights if n in set(part["night"])])
                        + "</div>")
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Proactivity history</title><style>{STYLE}{CHARTS}</style></head><body>
<h1>Proactivity over nights</h1>
<p class="note">Each suite's figure per night (ProactBench: weighted score; Proactive Agent: F1;
multimodal ProactiveBench: acc or agg; video ProactiveBench: PAUC at omega 0.5) with its 95 %
bootstrap interval over the suite's own unit (band).
A point is labelled where the revision or the served snapshot changes; a dashed line marks a
judge that changed (scores on either side are not comparable). Changes between consecutive
nights are paired over the samples both scored.</p>
<h2>Regressions and improvements</h2>{_findings(findings)}
<div class="charts">{''.join(sections)}</div>
<h2>Nights</h2>{_nights_table(table)}
</body></html>"""
    write_atomic(out / "history.html", page.encode("utf-8"))
    return {"history.csv": str(out / "history.csv"), "history.html": str(out / "history.html")}


def findings_section(findings: list[Finding], changes: list[str]) -> str:
    """The section a sweep's report.html starts with: what changed since the night before."""
    if not findings and not changes:
        return ""
    noticed = "".join(f"<li>{html.escape(line)}</li>" for line in changes)
    return ("<section id='since-last-night'><h2>Since the night before</h2>"
            + (_findings(findings) if findings else "")
            + (f"<h3>Models that changed behind their name</h3><ul>{noticed}</ul>"
               if changes else "") + "</section>")


def add_to_report(report: Path, section: str) -> None:
    """Put `section` at the top of an existing report page (right after its <body>)."""
    if not section or not report.exists():
        return
    page = report.read_text(encoding="utf-8")
    at = page.find("<body>")
    if at < 0:
        return
    at += len("<body>")
    write_atomic(report, (page[:at] + section + page[at:]).encode("utf-8"))
