"""What the video ProactiveBench shows beyond running an episode: its variant's name (the parts),
the console's PAUC table, a sweep's leaderboard and headline, the history of nights' verdicts and
the viewer's video pages.

Apart from suite.py, which wires the Task (data, frames, the steps, the episode judge, scoring), as
suites/presentation.py is apart from suites/base.py; ProactiveBenchVideo inherits this mixin.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import polars as pl

from ....config.settings import RunSettings
from ...declarations import SuiteModules
from ...presentation import SuitePresentation
from ..pauc import omega_column
from ..scoring import ALL_PARTS


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _interval(row: dict[str, Any], column: str) -> str:
    low, high = row[f"{column}_ci_low"], row[f"{column}_ci_high"]
    return "-" if low is None else f"{_cell(low)}-{_cell(high)}"


class ProactiveBenchVideoPresentation(SuitePresentation):
    """ProactiveBenchVideo's reporting and viewing; the class attributes below are the suite's."""

    display_name: ClassVar[str]

    def settings_variant(self, settings: RunSettings) -> str:
        parts = settings.corpus.parts
        return f"parts {','.join(parts)}" if parts else ""

    modules = SuiteModules(__package__, views="views", history="history",
                           report="report")

    def console_columns(self) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
        def pauc(omega: float) -> Callable[[dict[str, Any]], str]:
            return lambda row: _cell(row[omega_column(omega)])

        half = omega_column(0.5)
        return [("part", lambda row: row["part"]), ("turns", lambda row: str(row["turns"])),
                ("PAUC w=0", pauc(0.0)), ("PAUC w=0.5", pauc(0.5)), ("PAUC w=1", pauc(1.0)),
                ("w=0.5 95 % CI", lambda row: _interval(row, half)),
                ("final score", lambda row: _cell(row["final_score_mean"])),
                ("lost", lambda row: str(row["judge_errors"] + row["generation_errors"]
                                         + row["errors"])),
                ("refused", lambda row: str(row.get("refused") or 0))]

    def headline(self, board: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
        """One row per (model, judge): PAUC over all parts, best first."""
        rows = board.filter(pl.col("part") == ALL_PARTS).sort(omega_column(0.5),
                                                              descending=True, nulls_last=True)
        half = omega_column(0.5)
        return (["model", "judge", "turns", "PAUC w=0", "PAUC w=0.5", "95 % CI", "rank",
                 "PAUC w=1"],
                [[row["model"], row["judge"], str(row["turns"]), _cell(row["pauc_0"]),
                  _cell(row[half]), _interval(row, half), str(row.get("rank") or "-"),
                  _cell(row["pauc_1"])]
                 for row in rows.iter_rows(named=True)])
