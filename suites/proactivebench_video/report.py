"""The video ProactiveBench's section of `proactflow report` and its sweeps' leaderboard: PAUC
per part and over all parts for every evaluation (a judgments artifact) in the store, with
bootstrap intervals, beside the time-agnostic view (the final in-window score of each turn), so
that what timing changes is visible."""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from ...cache.artifacts import ArtifactStore, write_atomic
from .pauc import omega_column
from .scoring import score_parts

TURNS = "video_turns"
"""The suite's judgments stage (suite.ProactiveBenchVideo.stages.judgments)."""
_COLUMNS = ("model", "judge", "part", "turns", "pauc_0", "pauc_0.5", "pauc_0.5_ci_low",
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
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def section(store: ArtifactStore, out: Path, *, keys: list[str] | None = None,
            include_incomplete: bool = False) -> tuple[str, pl.DataFrame] | None:
    """The section's HTML and its leaderboard (written to proactivebench_video_leaderboard.csv);
    None when the store holds no evaluation of the suite."""
    board = leaderboard(store, keys, include_incomplete=include_incomplete)
    if board.is_empty():
        return None
    write_atomic(out / "proactivebench_video_leaderboard.csv", board.write_csv().encode())
    shown = board.sort("part", omega_column(0.5), descending=[False, True], nulls_last=True)
    header = "".join(f"<th>{html.escape(column)}</th>" for column in _COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row[column]))}</td>"
                                    for column in _COLUMNS) + "</tr>"
                   for row in shown.iter_rows(named=True))
    page = f"""<h2 id="proactivebench-video">ProactiveBench (video): PAUC</h2>
<p class="note">PAUC x 100, the turn-weighted mean over the gold turns of a part, at omega 0
(timing counts fully), 0.5 and 1 (timing ignored); a turn without a reply scores 25, a wrong
reply less. Interval of PAUC at omega 0.5: 95 % bootstrap over samples (1000 resamples, seed 0).
Time-agnostic view: answered = turns with a judged reply in their window, final_score_mean = the
mean of each one's last kept judge score (1-3).</p>
<table><tr>{header}</tr>{rows}</table>"""
    return page, board
