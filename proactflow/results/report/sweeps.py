"""A sweep's report: the leaderboard of the evaluations one sweep ran and, with its --out, the
files (report.html, leaderboard.csv), written the same way for every suite from what the suite
declares (`Suite.sweep_leaderboard`, its report section, or its evaluations' report)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from ...cache.artifacts import ArtifactStore
from ..evaluations import evaluation_of
from .pages import write_report, write_suite_page

if TYPE_CHECKING:
    from ...suites.base import Suite


def sweep_report(suite: "Suite", store: ArtifactStore, out: Path | None,
                 judgments_keys: list[str], *, seed: int = 0) -> pl.DataFrame:
    """The leaderboard of these evaluations (judgments artifact keys); with `out`, the report
    files too: the report of the evaluations read with their triggers, a suite's own section
    on a page of its own, or (a suite with neither) the leaderboard as leaderboard.csv."""
    if suite.evaluations_with_triggers:
        evaluations = []
        for key in judgments_keys:
            found = evaluation_of(store, key)
            if found is None:  # the flow just wrote it: its inputs are there
                raise RuntimeError(f"judgments {key} of this sweep lost its inputs")
            evaluations.append(found)
        if out is not None:
            # The report covers only these runs: the store may hold older ones.
            return write_report(store, out, seed=seed, evaluations=evaluations,
                                other_suites=False)["leaderboard"]
        return suite.sweep_leaderboard(store, judgments_keys, seed=seed)
    if out is None:
        return suite.sweep_leaderboard(store, judgments_keys, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    if not suite.reports_section:
        board = suite.sweep_leaderboard(store, judgments_keys, seed=seed)
        board.write_csv(out / "leaderboard.csv")
        return board
    section = suite.report_section(store, out, keys=judgments_keys, include_incomplete=True,
                                   published=None)
    assert section is not None, "a sweep that finished has evaluations"
    section[1].write_csv(out / "leaderboard.csv")
    return write_suite_page(out, f"{suite.display_name} sweep", *section)["leaderboard"]
