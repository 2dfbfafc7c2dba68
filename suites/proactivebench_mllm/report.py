"""The multimodal ProactiveBench's section of the report: one row per evaluation and dataset
(MCQA: acc and proactive steps; OEG: ps, cp, agg beside the package's own figures), from every
complete evaluation in the store."""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from ...cache.artifacts import ArtifactStore, write_atomic
from .outcomes import scores

OUTCOMES = "mllm_outcomes"
_COLUMNS = ("model", "judge", "mode", "hint", "reference", "dataset", "samples", "scored", "acc",
            "ps", "cp", "agg", "upstream_ps", "upstream_cp", "upstream_agg",
            "generation_errors", "judge_errors", "image_errors", "environment_crashes")


def leaderboard(store: ArtifactStore, keys: list[str] | None = None, *,
                include_incomplete: bool = False) -> pl.DataFrame:
    """The scores of each evaluation (a judgments artifact), its key in `evaluation`."""
    if keys is None:
        keys = sorted(key for key in store.keys(OUTCOMES)
                      if include_incomplete or store.get_by_key(OUTCOMES, key).complete)
    frames = [scores(store.get_by_key(OUTCOMES, key).frame()).with_columns(
        evaluation=pl.lit(key)) for key in keys]
    return pl.concat(frames) if frames else pl.DataFrame()


def _cell(value: object) -> str:
    if value is None:
        return "–"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def section(store: ArtifactStore, out: Path, *, keys: list[str] | None = None,
            include_incomplete: bool = False) -> tuple[str, pl.DataFrame] | None:
    """The section's HTML and its leaderboard (written to proactivebench_mllm_leaderboard.csv);
    None when the store holds no evaluation of this suite."""
    board = leaderboard(store, keys, include_incomplete=include_incomplete)
    if board.is_empty():
        return None
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "proactivebench_mllm_leaderboard.csv", board.write_csv().encode())
    columns = [c for c in _COLUMNS if board[c].null_count() < board.height]
    header = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row[c]))}</td>" for c in columns)
                   + "</tr>" for row in board.iter_rows(named=True))
    page = f"""<h2 id="proactivebench-mllm">ProactiveBench (multimodal)</h2>
<p class="note">Per dataset, the package's figures, unrounded here to one decimal: MCQA acc = %
of scored samples ending on the right category, ps = mean proactive steps (num_turns − 1); OEG ps,
cp, agg = % of judged answers, and upstream_* the package's own figures (judge errors as 0).
Failed calls, judge errors and samples the package cannot run are counted apart, never
scored.</p>
<table><tr>{header}</tr>{rows}</table>"""
    return page, board
