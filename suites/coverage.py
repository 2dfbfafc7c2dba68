"""How many of a run's judgments rows were scored, how many were lost and to what, and the
cause the rows give for each kind of loss: what a run's last line says (run/progress.py).

A suite names the status each kind of loss is counted by (`Suite.lost_statuses`); the rows'
`message` holds the cause (a call's error, as the server or the transport gave it).
"""

from __future__ import annotations

from collections import Counter

import polars as pl

Coverage = tuple[int, int, dict[str, int]]
"""(scored, total, lost by kind)."""


def coverage_of(rows: pl.DataFrame, scored: tuple[str, ...],
                lost: dict[str, str]) -> Coverage:
    status = rows["status"]
    return int(status.is_in(list(scored)).sum()), status.len(), {
        kind: int((status == name).sum()) for kind, name in lost.items()}


def causes_of(rows: pl.DataFrame, lost: dict[str, str]) -> dict[str, str]:
    """The most frequent message of each kind of loss that happened, with how many others
    there are ("connection refused by http://... (and 2 other causes)"): one line, a reader's
    first hint, the rows have the rest."""
    if "message" not in rows.columns:
        return {}
    causes = {}
    for kind, name in lost.items():
        messages = Counter(" ".join(str(message).split())
                           for message in rows.filter(pl.col("status") == name)["message"]
                           if message)
        if messages:
            cause, _ = messages.most_common(1)[0]
            if len(cause) > 400:  # room for a file's path and the reason after it
                cause = cause[:399] + "…"
            others = len(messages) - 1
            causes[kind] = cause + (f" (and {others} other cause{'s' * (others > 1)})"
                                    if others else "")
    return causes
