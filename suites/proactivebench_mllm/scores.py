"""MCQA scores per dataset (the package's tests/mcqa.py:124-136), unrounded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .environment import EpisodeState


@dataclass(frozen=True)
class McqaScores:
    samples: int
    acc: float | None
    """100 × the share of samples whose episode ended on the right category."""
    ps: float | None
    """Mean number of proactive steps (num_turns − 1)."""


def mcqa_scores(episodes: Sequence[EpisodeState]) -> McqaScores:
    """Scores over finished episodes (None for an empty dataset)."""
    if not episodes:
        return McqaScores(0, None, None)
    count = len(episodes)
    return McqaScores(samples=count,
                      acc=100 * sum(e.correct_prediction for e in episodes) / count,
                      ps=sum(e.num_turns - 1 for e in episodes) / count)
