"""What Proactive Agent's ProactiveBench shows beyond running a trace: the console's F1 table,
a sweep's leaderboard and headline, the history of nights' verdicts and the viewer's trace pages.

Apart from suite.py, which wires the Task (data, the model's chat, the judge, scoring), as
suites/presentation.py is apart from suites/base.py; ProactiveAgent inherits this mixin.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import polars as pl

from ...declarations import SuiteModules
from ...presentation import SuitePresentation, percent


class ProactiveAgentPresentation(SuitePresentation):
    """ProactiveAgent's reporting and viewing; the class attributes below are the suite's."""

    display_name: ClassVar[str]

    modules = SuiteModules(__package__, views="views", history="history",
                           report="report", imports=".published_traces")

    def console_columns(self) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
        def rate(name: str) -> Callable[[dict[str, Any]], str]:
            # Nothing scored: no rate, not 0.0 (ProactBench prints "-" likewise).
            return lambda row: percent(row[name]) if row["scored"] else "-"

        return [("split", lambda row: row["split"]), ("events", lambda r: str(r["events"])),
                ("scored", lambda r: str(r["scored"])), ("recall %", rate("recall")),
                ("precision %", rate("precision")), ("accuracy %", rate("accuracy")),
                ("false alarm %", rate("false_alarm")), ("F1 %", rate("f1")),
                ("F1 95 % CI", lambda r: f"{percent(r['f1_ci_low'])}-{percent(r['f1_ci_high'])}"
                 if r["scored"] else "-"), ("refused", lambda r: str(r.get("refused", 0)))]

    def headline(self, board: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
        """One row per evaluation, on its largest split (upstream's real_average holds every
        trace)."""
        widest = board.sort("events", descending=True).unique("evaluation", keep="first")
        rows = [[row["model"], row["judge"], row["split"], percent(row["f1"]),
                 f"{percent(row['f1_ci_low'])}–{percent(row['f1_ci_high'])}",
                 str(row.get("rank") or "-"), percent(row["precision"]), percent(row["recall"]),
                 str(row["scored"]), str(row["events"])]
                for row in widest.sort("f1", descending=True).iter_rows(named=True)]
        return ["model", "judge", "split", "F1", "95 % CI", "rank", "precision", "recall",
                "scored", "events"], rows
