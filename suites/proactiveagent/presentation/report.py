"""ProactiveBench's section of the report: a leaderboard per split with trace-bootstrap
intervals, a chart of F1 per split, and the authors' published numbers beside the measured ones,
labelled as published.

Published numbers are upstream's per-model results files (eval/results/<model>.csv at the pinned
commit, hash-checked and cached in the store like every upstream input), or the files of a
folder given with `report --published DIR`. They were computed on traces with fewer events than
the current test files (227 against 233), with the authors' reward model as the judge: they are
shown for reference, never ranked with measured rows.
"""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from ....cache.artifacts import ArtifactStore, write_atomic
from ....common.errors import UserError
from ...report_views import (fold, incomplete_list, incomplete_lines, only_incomplete_section,
                            pivot_table, rank_ranges)
from .. import upstream
from ..scoring import score_splits

VERDICTS = "proactiveagent_verdicts"
RESPONSES = "proactiveagent_responses"
PUBLISHED_SHA256 = {
    "activeagent.csv": "dd6e67c2d395a0a96b7384d08a22a5cf5164a1a07e75e5cfb6a720bec23c00e7",
    "activellama.csv": "5ada8ed62ae4e5f941c7a28903f9891bbf3e29c65981396c2dff444e8ce7af27",
    "activenoagent.csv": "f7d4ea74d3b9a92813731cf921178935b72738a29c240cedeb8d3060f5c5a579",
    "activeqwen.csv": "021843616fed03de989f1e963faa17249998f714edf668184a9f80f72fbe1cf8",
    "claude-3-5-sonnet.csv": "e8cffbf712005005b4ae2752bf90a1d500aea3e3b15c1cc1a9c8c97176155a18",
    "claude-3-sonnet-20240229.csv":
        "b5a5279e384a5c9dab098ba2fa23b3e771708cf0fffddbbee7efbb059730ced7",
    "deepseek-7b-chat.csv": "a4ae90d2b7e095c09d407da90ba5c8575ed8607b766ddd67ae1187fc333f5c2a",
    "gpt-3.5-turbo.csv": "690bbe42555edaaaf6a64c7675cfc5e9e18b5bd0b9461d9998170e493d1c6272",
    "gpt-4o-mini.csv": "c7c8836eb1130e70002a7870dc88a225ef0db50bd3ad1d3b808a2e28a21f95fa",
    "gpt-4o.csv": "8d214671384369dc2868dd3a78f696f3333ec8088e4bff5cca869b1d9e95e33b",
    "llama3-70b.csv": "d3f1b7040cf6cf0d9939d9303a497b9855d6bc2d8eae39d59e6d1b5d88592592",
    "llama3-8b.csv": "7a7cdc7082c8a61c5b6999c55ef52dc0294bc342e0c7e2409df7d8750247f273",
    "llama3.1-70b.csv": "dcf4c0f6e028f84e0ee95525672529aacf4e68f8b8856d889910dc4f038e50f3",
    "llama3.1-8b.csv": "21c92b059bd526971b5f257a3b8bd84137526ea8ef7646433ec7fc4fcfd98414",
    "qwen2-72b-instruct.csv": "cf2a71d67df650f35d10695d577a00809959fa4f50fd4c5fe87dedfbbab0fe00",
    "qwen2-7b.csv": "b8dc86ecdd0c0fe03a8c9c646139e858626f09284cae3ce65395b0372db50af9",
}
"""sha256 of each published results file at the pinned commit."""
_COLUMNS = ("label", "source", "split", "rank", "f1", "f1_ci_low", "f1_ci_high", "precision", "recall",
            "accuracy", "false_alarm", "events", "scored")


def leaderboard(store: ArtifactStore, keys: list[str] | None = None, *,
                include_incomplete: bool = False, seed: int = 0) -> pl.DataFrame:
    """Measured rows: one per (evaluation, split); every complete evaluation by default (the
    F1 intervals are score_splits' own, whatever `seed`)."""
    if keys is None:
        keys = sorted(key for key in store.keys(VERDICTS)
                      if include_incomplete or store.get_by_key(VERDICTS, key).complete)
    frames = []
    for key in keys:
        verdicts = store.get_by_key(VERDICTS, key)
        scores = score_splits(verdicts.frame())
        frames.append(scores.with_columns(
            evaluation=pl.lit(key), source=pl.lit("measured"),
            label=pl.concat_str("model", pl.lit(_revision_label(store, verdicts.material())
                                                + " judged by "), "judge",
                                pl.lit(f" [{key[:8]}]"))))
    if not frames:
        return pl.DataFrame()
    return rank_ranges(pl.concat(frames), "split", "f1_ci_low", "f1_ci_high")


def _revision_label(store: ArtifactStore, verdicts_material: dict) -> str:
    """"@<revision>" of the model under test when its responses carry one (imported published
    traces: "@published-traces"), so they are told apart from a run of the same model."""
    responses_key = verdicts_material.get("inputs", {}).get(RESPONSES)
    try:
        role = store.material(RESPONSES, responses_key)["settings"]["model_under_test"] \
            if responses_key else {}
    except (FileNotFoundError, KeyError, TypeError):
        return ""
    revision = role.get("revision") if isinstance(role, dict) else None
    return f"@{revision}" if revision else ""


def published_results(store: ArtifactStore, folder: Path | None) -> tuple[pl.DataFrame, str]:
    """The published rows, and where they came from (or why there are none)."""
    rows, where = [], ""
    if folder is not None:
        files = sorted(Path(folder).expanduser().glob("*.csv"))
        if not files:
            raise UserError(f"--published {folder}: no results files (*.csv) there")
        texts = {path.name: path.read_text(encoding="utf-8") for path in files}
        where = str(folder)
    else:
        texts = {}
        try:
            for name, digest in PUBLISHED_SHA256.items():
                texts[name] = upstream.fetch_upstream_file(
                    store, f"eval/results/{name}", digest).decode("utf-8")
        except UserError as exc:
            return pl.DataFrame(), f"published numbers not shown: {exc}"
        where = f"{upstream.UPSTREAM_REPO}@{upstream.UPSTREAM_COMMIT[:12]}:eval/results"
    for name, text in texts.items():
        frame = pl.read_csv(text.encode())
        for row in frame.iter_rows(named=True):
            rows.append({"label": f"{name[:-4]} (published)", "source": "published",
                         "split": row["Category"], "rank": "-", "f1": row["F1-Score"], "f1_ci_low": None,
                         "f1_ci_high": None, "precision": row["Precision"],
                         "recall": row["Recall"], "accuracy": row["Accuracy"],
                         "false_alarm": row["False-Alarm"], "events": row["Total Events"],
                         "scored": None})
    return pl.DataFrame(rows, schema_overrides={"f1_ci_low": pl.Float64,
                                                "f1_ci_high": pl.Float64,
                                                "scored": pl.Int64}), where


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


_RATES = ("f1", "f1_ci_low", "f1_ci_high", "precision", "recall", "accuracy", "false_alarm")


def _cell(column: str, value: object) -> str:
    if column in _RATES:
        return _pct(value if isinstance(value, float) else None)
    return "–" if value is None else str(value)


def chart(board: pl.DataFrame) -> str:
    """F1 per split, one bar per evaluation, with its interval as a whisker (SVG)."""
    splits = sorted(set(board["split"].to_list()))
    labels = sorted(set(board["label"].to_list()))
    width, bar, gap, left = 820, 14, 30, 360
    height = 40 + len(splits) * (len(labels) * bar + gap)
    parts, y = [], 30
    for split in splits:
        parts.append(f'<text x="0" y="{y - 6}" font-weight="bold">{html.escape(split)}</text>')
        for index, label in enumerate(labels):
            row = board.filter((pl.col("split") == split) & (pl.col("label") == label))
            if row.is_empty():
                continue
            found = row.row(0, named=True)
            length = 400 * (found["f1"] or 0)
            top = y + index * bar
            parts.append(f'<rect x="{left}" y="{top}" width="{length:.1f}" height="{bar - 3}" '
                         f'fill="hsl({(index * 67) % 360},55%,55%)"><title>'
                         f'{html.escape(label)}: F1 {_pct(found["f1"])}</title></rect>'
                         f'<text x="{left - 5}" y="{top + bar - 4}" text-anchor="end" '
                         f'font-size="11">{html.escape(label[:60])}</text>')
            if found["f1_ci_low"] is not None:
                low, high = (left + 400 * found["f1_ci_low"], left + 400 * found["f1_ci_high"])
                middle = top + (bar - 3) / 2
                parts.append(f'<line x1="{low:.1f}" x2="{high:.1f}" y1="{middle}" '
                             f'y2="{middle}" stroke="black"/>')
        y += len(labels) * bar + gap
    return (f'<svg width="{width}" height="{height}" role="img" aria-label="F1 per split">'
            + "".join(parts) + "</svg>")


def section(store: ArtifactStore, out: Path, *, keys: list[str] | None = None,
            include_incomplete: bool = False, published: Path | None = None
            ) -> tuple[str, pl.DataFrame] | None:
    """The section's HTML and its measured leaderboard (written to
    proactiveagent_leaderboard.csv); None when the store holds no ProactiveBench evaluation."""
    board = leaderboard(store, keys, include_incomplete=include_incomplete)
    if board.is_empty():
        from ... import get_suite

        return only_incomplete_section(
            get_suite("proactiveagent"), "ProactiveBench (Proactive Agent)", store,
            include_incomplete)
    write_atomic(out / "proactiveagent_leaderboard.csv", board.write_csv().encode())
    reference, where = published_results(store, published)
    from ... import get_suite

    left_out = [] if include_incomplete else incomplete_lines(
        get_suite("proactiveagent"), store, board["evaluation"].unique().to_list())
    shown = board.select(_COLUMNS).sort("split", "f1", descending=[False, True])
    table = pl.concat([shown, reference.select(_COLUMNS)], how="vertical_relaxed") \
        if not reference.is_empty() else shown
    rows = "".join(
        "<tr" + (' class="published"' if row["source"] == "published" else "") + ">"
        + "".join(f"<td>{html.escape(_cell(column, row[column]))}</td>" for column in _COLUMNS)
        + "</tr>" for row in table.iter_rows(named=True))
    header = "".join(f"<th>{html.escape(c)}</th>" for c in _COLUMNS)
    note = (f"Published rows come from {html.escape(where)}: computed by the authors on traces "
            "with fewer events than today's test files, judged by their reward model; shown "
            "for reference, not ranked.") if not reference.is_empty() else html.escape(where)
    page = f"""<h2 id="proactiveagent">ProactiveBench (Proactive Agent)</h2>
<p class="note">Per split, upstream's metrics (accepted proposals are the positive class; 1e-8 in
each denominator). F1 intervals: 95 % bootstrap over traces (1000 resamples, seed 0).</p>
<h3>F1 per split</h3>
{pivot_table(board, suite="proactiveagent", group="split", value="f1", low="f1_ci_low",
             high="f1_ci_high", scale=100)}
{chart(board)}
{fold("Leaderboard: every metric, and the published numbers",
      f"<table><tr>{header}</tr>{rows}</table>")}
<p class="note">{note}</p>{incomplete_list(left_out)}"""
    return page, board

