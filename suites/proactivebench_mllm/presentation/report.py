"""The multimodal ProactiveBench's section of the report and its sweeps' leaderboard: per
variant (MCQA, MCQA with the hint, MCQA in reference mode, OEG...), the model x dataset table of
the variant's headline figure (MCQA acc, OEG agg) with a 95 % bootstrap interval over samples,
rank ranges, a chart of every evaluation's figure over all datasets, and the full table (every
count) behind a toggle, only with the columns the variant fills."""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from ....cache.artifacts import ArtifactStore, write_atomic
from ...report_views import (bars, bootstrap_mean, fold, incomplete_list, incomplete_lines,
                            only_incomplete_section, pivot_table, rank_ranges)
from ..datasets import DATASETS
from ..outcomes import scores

OUTCOMES = "mllm_outcomes"
_COLUMNS = ("model", "judge", "variant", "dataset", "samples", "scored", "acc", "ps", "cp",
            "agg", "ci_low", "ci_high", "rank", "upstream_ps", "upstream_cp", "upstream_agg",
            "generation_errors", "judge_errors", "image_errors", "environment_crashes")
SCORER = "rules"
"""The judge column of an MCQA evaluation: the package's rules score it (one name everywhere)."""


def variant_of(row: dict) -> str:
    """"mcqa", "mcqa hint", "mcqa reference", "oeg", "oeg hint"."""
    return " ".join([row["mode"], *(["hint"] if row["hint"] else []),
                     *(["reference"] if row["reference"] else [])])


def headline(mode: str) -> str:
    return "acc" if mode == "mcqa" else "agg"


def _intervals(outcomes: pl.DataFrame, seed: int) -> dict[str, tuple[float | None, float | None]]:
    """Dataset (and "all") -> the bootstrap interval of the headline figure over its scored
    samples."""
    final = outcomes.filter(pl.col("final") & (pl.col("status") == "scored"))
    if final.is_empty():
        return {}
    mcqa = final["mode"][0] == "mcqa"
    values = final.select("dataset", value=(pl.col("correct_prediction").cast(pl.Float64)
                                            if mcqa else pl.col("agg").cast(pl.Float64)) * 100)
    found = {"all": bootstrap_mean(values["value"].to_list(), seed=seed)}
    for (dataset,), rows in values.group_by("dataset"):
        found[str(dataset)] = bootstrap_mean(rows["value"].to_list(), seed=seed)
    return found


def leaderboard(store: ArtifactStore, keys: list[str] | None = None, *,
                include_incomplete: bool = False, seed: int = 0) -> pl.DataFrame:
    """The scores of each evaluation (a judgments artifact, its key in `evaluation`), with the
    variant, the headline figure's interval (`ci_low`, `ci_high`) and rank ranges among the
    evaluations of the same variant."""
    if keys is None:
        keys = sorted(key for key in store.keys(OUTCOMES)
                      if include_incomplete or store.get_by_key(OUTCOMES, key).complete)
    frames = []
    for key in keys:
        outcomes = store.get_by_key(OUTCOMES, key).frame()
        board = scores(outcomes)
        if board.is_empty():
            continue
        intervals = _intervals(outcomes, seed)
        rows = board.to_dicts()
        frames.append(board.with_columns(
            evaluation=pl.lit(key),
            variant=pl.Series([variant_of(r) for r in rows], dtype=pl.String),
            label=pl.Series([f"{r['model']} ({variant_of(r)})" if r["mode"] == "mcqa" else
                             f"{r['model']} judged by {r['judge']} ({variant_of(r)})"
                             for r in rows], dtype=pl.String),
            ci_low=pl.Series([intervals.get(r["dataset"], (None, None))[0] for r in rows],
                             dtype=pl.Float64),
            ci_high=pl.Series([intervals.get(r["dataset"], (None, None))[1] for r in rows],
                              dtype=pl.Float64)))
    if not frames:
        return pl.DataFrame()
    return rank_ranges(pl.concat(frames, how="diagonal_relaxed"), "dataset", "ci_low",
                       "ci_high", within=("variant",))


def _cell(value: object) -> str:
    if value is None:
        return "–"
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _full_table(board: pl.DataFrame) -> str:
    columns = [c for c in _COLUMNS if c in board.columns and board[c].null_count() < board.height]
    header = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(row[c]))}</td>" for c in columns)
                   + "</tr>" for row in board.iter_rows(named=True))
    return f"<table><tr>{header}</tr>{rows}</table>"


def section(store: ArtifactStore, out: Path, *, keys: list[str] | None = None,
            include_incomplete: bool = False, published: Path | None = None
            ) -> tuple[str, pl.DataFrame] | None:
    """The section's HTML and its leaderboard (written to proactivebench_mllm_leaderboard.csv);
    None when the store holds no evaluation of this suite. No published results are shown
    (`published` is Proactive Agent's)."""
    from ... import get_suite

    board = leaderboard(store, keys, include_incomplete=include_incomplete)
    if board.is_empty():
        return only_incomplete_section(
            get_suite("proactivebench-mllm"), "ProactiveBench (multimodal)", store,
            include_incomplete)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "proactivebench_mllm_leaderboard.csv", board.write_csv().encode())
    order = [d.short for d in DATASETS] + ["all"]
    parts = []
    for (variant,), rows in board.group_by("variant", maintain_order=True):
        mode = str(variant).split()[0]
        figure = headline(mode)
        overall = rows.filter(pl.col("dataset") == "all").sort(figure, descending=True,
                                                                nulls_last=True)
        anchor = "proactivebench-mllm-" + str(variant).replace(" ", "-")
        parts.append(
            f'<h3 id="{anchor}">{html.escape(str(variant).upper())}: {figure} per dataset</h3>'
            + pivot_table(rows, suite="proactivebench-mllm", group="dataset", value=figure,
                          low="ci_low", high="ci_high", groups=order)
            + bars(overall, value=figure, low="ci_low", high="ci_high",
                   title=f"{figure}, all datasets")
            + fold(f"All columns ({variant})", _full_table(rows)))
    shown = board["evaluation"].unique().to_list()
    left_out = [] if include_incomplete else incomplete_lines(
        get_suite("proactivebench-mllm"), store, shown)
    page = f"""<h2 id="proactivebench-mllm">ProactiveBench (multimodal)</h2>
<p class="note">Per variant and dataset, the package's figures, unrounded here to one decimal:
MCQA acc = % of scored samples ending on the right category (scored by the package's rules),
ps = mean proactive steps (num_turns − 1); OEG ps, cp, agg = % of judged answers, and upstream_*
the package's own figures (judge errors as 0). Intervals of the headline figure (MCQA acc, OEG
agg): 95 % bootstrap over samples (1000 resamples, seed 0); a rank such as 1-3 means the
intervals overlap. Failed calls, judge errors and samples the package cannot run are counted
apart, never scored.</p>
{''.join(parts)}{incomplete_list(left_out)}"""
    return page, board

