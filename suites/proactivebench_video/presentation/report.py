"""The video ProactiveBench's section of `proactflow report` and its sweeps' leaderboard: PAUC
per part and over all parts for every evaluation (a judgments artifact) in the store, with
bootstrap intervals, beside the time-agnostic view (the final in-window score of each turn), so
that what timing changes is visible."""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from ....cache.artifacts import ArtifactStore, write_atomic
from ...report_views import (bars, fold, incomplete_list, incomplete_lines,
                            only_incomplete_section, pivot_table, rank_ranges)
from ..pauc import omega_column
from ..scoring import score_parts

TURNS = "video_turns"
"""The suite's judgments stage (suite.ProactiveBenchVideo.stages.judgments)."""
PART_ORDER = ("WEB", "EGO", "TV", "VAD", "all")
_COLUMNS = ("model", "judge", "rank", "part", "turns", "pauc_0", "pauc_0.5", "pauc_0.5_ci_low",
            "pauc_0.5_ci_high", "pauc_1", "answered", "final_score_mean", "judge_errors",
            "generation_errors", "errors")


def leaderboard(store: ArtifactStore, keys: list[str] | None = None, *,
                include_incomplete: bool = False, seed: int = 0) -> pl.DataFrame:
    """One row per (evaluation, part); every complete evaluation by default."""
    if keys is None:
        keys = sorted(key for key in store.keys(TURNS)
                      if include_incomplete or store.get_by_key(TURNS, key).complete)
    frames = [score_parts(store.get_by_key(TURNS, key).frame(), seed=seed)
              .with_columns(evaluation=pl.lit(key)) for key in keys]
    if not frames:
        return pl.DataFrame()
    board = pl.concat(frames, how="diagonal_relaxed")
    board = board.with_columns(label=pl.concat_str(
        "model", pl.lit(" judged by "), "judge", pl.lit(" ["), pl.col("evaluation").str.slice(0, 8),
        pl.lit("]")))
    half = omega_column(0.5)
    return rank_ranges(board, "part", f"{half}_ci_low", f"{half}_ci_high")


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def section(store: ArtifactStore, out: Path, *, keys: list[str] | None = None,
            include_incomplete: bool = False, published: Path | None = None
            ) -> tuple[str, pl.DataFrame] | None:
    """The section's HTML and its leaderboard (written to proactivebench_video_leaderboard.csv);
    None when the store holds no evaluation of the suite. No published results are shown
    (`published` is Proactive Agent's)."""
    board = leaderboard(store, keys, include_incomplete=include_incomplete)
    if board.is_empty():
        from ... import get_suite

        return only_incomplete_section(
            get_suite("proactivebench-video"), "ProactiveBench (video): PAUC", store,
            include_incomplete)
    write_atomic(out / "proactivebench_video_leaderboard.csv", board.write_csv().encode())
    shown = board.sort("part", omega_column(0.5), descending=[False, True], nulls_last=True)
    half = omega_column(0.5)
    header = "".join(f"<th>{html.escape(column)}</th>" for column in _COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row[column]))}</td>"
                                    for column in _COLUMNS) + "</tr>"
                   for row in shown.iter_rows(named=True))
    overall = board.filter(pl.col("part") == "all").sort(half, descending=True, nulls_last=True)
    from ... import get_suite

    left_out = [] if include_incomplete else incomplete_lines(
        get_suite("proactivebench-video"), store, board["evaluation"].unique().to_list())
    page = f"""<h2 id="proactivebench-video">ProactiveBench (video): PAUC</h2>
<p class="note">PAUC x 100, the turn-weighted mean over the gold turns of a part, at omega 0
(timing counts fully), 0.5 and 1 (timing ignored); a turn without a reply scores 25, a wrong
reply less. Interval of PAUC at omega 0.5: 95 % bootstrap over samples (1000 resamples, seed 0);
a rank such as 1-3 means the intervals overlap.
Time-agnostic view: answered = turns with a judged reply in their window, final_score_mean = the
mean of each one's last kept judge score (1-3).</p>
<h3>PAUC at omega 0.5 per part</h3>
{pivot_table(board, suite="proactivebench-video", group="part", value=half,
             low=f"{half}_ci_low", high=f"{half}_ci_high", groups=PART_ORDER)}
{bars(overall, value=half, low=f"{half}_ci_low", high=f"{half}_ci_high",
      title="PAUC at omega 0.5, all parts")}
{fold("All columns (every omega, the time-agnostic view, lost turns)",
      f"<table><tr>{header}</tr>{rows}</table>")}
{incomplete_list(left_out)}"""
    return page, board

