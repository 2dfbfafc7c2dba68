"""What the multimodal ProactiveBench shows beyond running an episode: its variant's name, the
console's per-dataset table, a sweep's leaderboard and headline, the history of nights' verdicts
and the viewer's episode pages.

Apart from suite.py, which wires the Task (data, the steps shown, the OEG judge, scoring), as
suites/presentation.py is apart from suites/base.py; ProactiveBenchMllm inherits this mixin.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import polars as pl

from ....config.settings import RunSettings
from ...declarations import SuiteModules
from ...presentation import SuitePresentation
from ..datasets import mode_of
from .outputs import headline_rows


class ProactiveBenchMllmPresentation(SuitePresentation):
    """ProactiveBenchMllm's reporting and viewing; the class attributes below are the suite's."""

    display_name: ClassVar[str]

    def variant_name(self, judgments: pl.DataFrame) -> str:
        if judgments.is_empty():
            return ""
        first = judgments.row(0, named=True)
        return " ".join([first["mode"], *(["hint"] if first["hint"] else []),
                         *(["reference"] if first["reference"] else [])])

    def settings_variant(self, settings: RunSettings) -> str:
        options = settings.suite_options
        return " ".join([mode_of(settings), *(["hint"] if options.get("hint") else []),
                         *(["reference"] if options.get("reference") else [])])

    modules = SuiteModules(__package__, views="views", history="history",
                           report="report")

    def console_columns(self) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
        def number(name: str) -> Callable[[dict[str, Any]], str]:
            return lambda row: "-" if row[name] is None else f"{row[name]:.1f}"

        return [("dataset", lambda r: r["dataset"]), ("samples", lambda r: str(r["samples"])),
                ("scored", lambda r: str(r["scored"])), ("acc", number("acc")),
                ("ps", number("ps")), ("cp", number("cp")), ("agg", number("agg")),
                ("errors", lambda r: str(r["generation_errors"] + r["judge_errors"])),
                ("refused", lambda r: str(r.get("refused") or 0))]

    def console_columns_for(self, settings: RunSettings
                            ) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
        unfilled = {"cp", "agg"} if mode_of(settings) == "mcqa" else {"acc"}
        return [column for column in self.console_columns() if column[0] not in unfilled]

    def headline(self, board: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
        return headline_rows(board)
