"""Pieces every suite's report section is made of (each suite's report.py): the model x group table
with intervals, rank ranges, a bar chart of one group with interval whiskers, a bootstrap of a
mean over samples, a fold for wide tables, and the list of evaluations left out as incomplete.

Tables fit a 1,400-pixel screen: the model x group table holds one short cell per group
(`62.5 [50.0-75.0]`); the full table with every count sits behind a toggle.
"""

from __future__ import annotations

import html
import json
import random
import re
from pathlib import Path
from typing import Any, Sequence

import polars as pl

from ..cache.artifacts import write_atomic

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac"]


def anchor(suite: str, key: str) -> str:
    """The id of an evaluation's row in a suite's section: `<suite>-<key prefix>`."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"{suite}-{key[:10]}")


def _percentile(ordered: list[float], q: float) -> float:
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def bootstrap_mean(values: Sequence[float], *, samples: int = 1000, seed: int = 0,
                   confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of the mean of `values` (one per sample) over samples drawn with
    replacement; seeded, so the same values give the same interval."""
    if not values:
        return None, None
    draw = random.Random(seed)
    n = len(values)
    estimates = sorted(sum(values[draw.randrange(n)] for _ in range(n)) / n
                       for _ in range(samples))
    tail = (1 - confidence) / 2
    return _percentile(estimates, tail), _percentile(estimates, 1 - tail)


def rank_ranges(board: pl.DataFrame, group: str, low: str, high: str,
                within: Sequence[str] = ()) -> pl.DataFrame:
    """`rank` per group (and per `within` columns): one number where the intervals separate a
    row from every other, else the range of ranks it could hold ("1-3": tied within the
    intervals); "-" for a row without an interval."""
    rows = board.to_dicts()
    ranks = []
    for row in rows:
        if row[low] is None:
            ranks.append("-")
            continue
        peers = [r for r in rows if r is not row and r[group] == row[group] and r[low] is not None
                 and all(r[c] == row[c] for c in within)]
        best = 1 + sum(1 for r in peers if r[low] > row[high])
        worst = 1 + sum(1 for r in peers if r[high] >= row[low])
        ranks.append(str(best) if best == worst else f"{best}-{worst}")
    return board.with_columns(pl.Series("rank", ranks, dtype=pl.String))


def _number(value: Any, scale: float) -> str:
    return "–" if value is None else f"{scale * value:.1f}"


def pivot_table(board: pl.DataFrame, *, suite: str, group: str, value: str,
                low: str | None = None, high: str | None = None, groups: Sequence[str] = (),
                scale: float = 1.0, label: str = "label") -> str:
    """Rows: evaluations (each with its anchor); columns: the groups in `groups` order (then
    any other); a cell: the value, with its interval where the board has one."""
    found = list(dict.fromkeys(board[group].to_list()))
    columns = [g for g in groups if g in found] + [g for g in found if g not in groups]
    cells: dict[tuple[str, str], dict[str, Any]] = {
        (row["evaluation"], row[group]): row for row in board.iter_rows(named=True)}
    evaluations = list(dict.fromkeys(zip(board["evaluation"].to_list(),
                                         board[label].to_list())))
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    for key, name in evaluations:
        row_cells = []
        for column in columns:
            row = cells.get((key, column))
            if row is None:
                row_cells.append("<td>–</td>")
                continue
            text = _number(row[value], scale)
            if low and high and row.get(low) is not None:
                text += (f" <small>[{_number(row[low], scale)}–"
                         f"{_number(row[high], scale)}]</small>")
            row_cells.append(f"<td>{text}</td>")
        body.append(f'<tr id="{anchor(suite, key)}"><td class="name">'
                    f'<a href="#{anchor(suite, key)}">{html.escape(str(name))}</a></td>'
                    + "".join(row_cells) + "</tr>")
    return (f"<table class='pivot'><thead><tr><th>evaluation</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def bars(board: pl.DataFrame, *, value: str, low: str | None = None, high: str | None = None,
         scale: float = 1.0, top: float = 100.0, title: str = "", label: str = "label") -> str:
    """One horizontal bar per row of `board` (one group's rows), with its interval as a
    whisker (SVG, no script)."""
    rows = board.to_dicts()
    width, left, bar = 900, 380, 18
    height = 24 + len(rows) * bar
    x = lambda v: left + (width - left - 20) * max(0.0, min(1.0, scale * v / top))  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="{html.escape(title)}">']
    for tick in range(0, 101, 25):
        at = x(top * tick / 100 / scale)
        parts.append(f'<line x1="{at:.1f}" x2="{at:.1f}" y1="0" y2="{height - 16}" '
                     f'stroke="#ddd"/><text x="{at:.1f}" y="{height - 4}" font-size="10" '
                     f'text-anchor="middle">{top * tick / 100:g}</text>')
    for i, row in enumerate(rows):
        y = 4 + i * bar
        name = html.escape(str(row[label]))
        parts.append(f'<text x="{left - 6}" y="{y + 12}" font-size="11" text-anchor="end">'
                     f'{name[:60]}</text>')
        if row[value] is None:
            continue
        parts.append(f'<rect x="{left}" y="{y}" width="{x(row[value]) - left:.1f}" '
                     f'height="{bar - 5}" fill="{PALETTE[i % len(PALETTE)]}"><title>{name}: '
                     f'{_number(row[value], scale)}</title></rect>')
        if low and high and row.get(low) is not None:
            parts.append(f'<line x1="{x(row[low]):.1f}" x2="{x(row[high]):.1f}" '
                         f'y1="{y + (bar - 5) / 2}" y2="{y + (bar - 5) / 2}" stroke="#222" '
                         f'stroke-width="1.5"/>')
    parts.append("</svg>")
    return "".join(parts)


def fold(summary: str, content: str) -> str:
    """Content behind a toggle (a wide table with every count)."""
    return (f"<details><summary>{html.escape(summary)}</summary>"
            f"<div class='scroll'>{content}</div></details>")


def incomplete_list(lines: Sequence[str]) -> str:
    """The evaluations left out because calls failed, with what is missing."""
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return ("<p class='note'><b>Left out as incomplete</b> (some calls failed; re-run to "
            "retry them, or see them with --include-incomplete):</p>"
            f"<ul class='incomplete'>{items}</ul>")


def incomplete_lines(suite: Any, store: Any, shown: Sequence[str]) -> list[str]:
    """One line per incomplete evaluation of `suite` in `store` not among `shown`: its model,
    judge, key, and how many samples are missing by failure kind (Suite.coverage)."""
    lines = []
    for key in sorted(store.keys(suite.stages.judgments)):
        if key in shown:
            continue
        try:
            artifact = store.get_by_key(suite.stages.judgments, key)
        except FileNotFoundError:  # moved aside as unreadable meanwhile (said in one line)
            continue
        if artifact.complete:
            continue
        frame = artifact.frame()
        if frame.is_empty():
            continue
        scored, total, lost = suite.coverage(frame)
        first = frame.row(0, named=True)
        missing = ", ".join(f"{kind} {n}" for kind, n in lost.items() if n)
        lines.append(f"{first.get('model')} judged by {first.get('judge')} [{key[:10]}]: "
                     f"{scored} of {total} scored" + (f"; not scored: {missing}"
                                                      if missing else ""))
    return lines


def only_incomplete_section(suite: Any, title: str, store: Any, include_incomplete: bool
                            ) -> tuple[str, pl.DataFrame] | None:
    """The report section of a store whose every evaluation of the suite is incomplete: the
    list of them with what is missing (never dropped silently); None when there is none."""
    left_out = [] if include_incomplete else incomplete_lines(suite, store, [])
    if not left_out:
        return None
    return (f'<h2 id="{suite.name}">{html.escape(title)}</h2>' + incomplete_list(left_out),
            pl.DataFrame())


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


def write_agreement(out: Path, table: pl.DataFrame, disagreements: pl.DataFrame) -> None:
    """agreement.csv (confusion matrices as JSON text) and disagreements.csv."""
    flat = table.with_columns(pl.Series("confusion", [json.dumps(m) for m in
                                                      table["confusion"].to_list()],
                                        dtype=pl.String))
    write_atomic(out / "agreement.csv", flat.write_csv().encode())
    write_atomic(out / "disagreements.csv", disagreements.write_csv().encode())


def scores_section(suite: Any, store: Any, out: Path, *, keys: list[str] | None,
                   include_incomplete: bool) -> tuple[str, pl.DataFrame] | None:
    """The report section of a suite that declares no report module of its own: its scores
    table (`Suite.score`) of each evaluation, one row per group, written as
    <suite>_leaderboard.csv; every complete evaluation in the store when `keys` is None."""
    stage = suite.stages.judgments
    if keys is None:
        keys = sorted(key for key in store.keys(stage)
                      if include_incomplete or store.get_by_key(stage, key).complete)
    frames = []
    for key in keys:
        judgments = store.get_by_key(stage, key).frame()
        if not judgments.is_empty():
            frames.append(suite.score(judgments).with_columns(evaluation=pl.lit(key)))
    if not frames:
        return only_incomplete_section(suite, suite.display_name, store, include_incomplete)
    board = pl.concat(frames, how="diagonal_relaxed")
    write_atomic(out / f"{suite.name.replace('-', '_')}_leaderboard.csv",
                 board.write_csv().encode())
    left_out = [] if include_incomplete else incomplete_lines(
        suite, store, board["evaluation"].unique().to_list())
    shown = board.with_columns(pl.col("evaluation").str.slice(0, 10))
    return (f'<h2 id="{html.escape(suite.name)}">{html.escape(suite.display_name)}</h2>'
            f'<p class="note">{html.escape(suite.title)}: each evaluation\'s scores per '
            f"{html.escape(suite.group_column)}.</p>{table_html(shown)}"
            f"{incomplete_list(left_out)}", board)
