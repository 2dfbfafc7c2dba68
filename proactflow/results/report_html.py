"""The report's HTML: one self-contained page (inline SVG chart, tables, no script)."""

from __future__ import annotations

import html

import polars as pl

from ..suites.proactbench.corpus import PHASES
from ..suites.proactbench.agreement import ORDER
from ..suites.proactbench.leaderboard import OVERALL


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


def table_html(frame: pl.DataFrame, percent: tuple[str, ...] = ()) -> str:
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


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1180px;
color:#222;padding:0 1rem}h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0}
th,td{padding:.25rem .5rem;
white-space:nowrap;
border-bottom:1px solid #e5e5e5;text-align:right}
th:nth-child(-n+4),td:nth-child(-n+4){text-align:left}thead th{background:#f6f6f6}
.wrap td{white-space:normal;text-align:left;vertical-align:top;min-width:5rem}
table.pivot td,table.pivot th{text-align:right}table.pivot th:first-child{text-align:left}table.pivot td.name{text-align:left;white-space:normal;
max-width:26rem}table.pivot small{color:#666}tr:target{background:#fff6d6}
details{margin:.5rem 0}summary{cursor:pointer;color:#245;font-size:.9rem}
ul.contents{font-size:.9rem}ul.contents li.h3{margin-left:1.2rem}
ul.incomplete{font-size:.85rem;color:#7d1a1a}
.legend{font-size:.8rem;margin:.3rem 0 0 48px}.key{margin-right:1rem}.key i{display:inline-block;
width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px}.note{color:#666;font-size:.85rem}
"""
