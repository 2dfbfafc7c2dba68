"""The benchmark's arithmetic, as its own evaluation scripts define it.

Per split, every (proposal, verdict) of the split's events is counted, "accepted" being the
positive class: a task proposed and accepted is a true positive, proposed and rejected a false
positive, no task and accepted (no help was needed) a true negative, no task and rejected a false
negative. Each rate has 1e-8 added to its denominator, as upstream's, so that the published
figures are reproduced to the last digit (and an empty split gives 0, not an error).

Judge calibration scores a candidate judge against the human-labelled reward test set: its
verdict (accepted = positive) against the human label, overall and per category (Missed-Need,
Correct-Rejection, Correct-Detection, False-Alarm).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable

EPSILON = 1e-8

METRIC_COLUMNS = ("Category", "Recall", "Precision", "Accuracy", "False-Alarm", "F1-Score",
                  "Accept Rate", "Total Events")
"""The columns of upstream's per-model results CSV, in its order."""

CATEGORIES = ("Missed-Need (MN)", "Correct-Rejection (CR)", "Correct-Detection (CD)",
              "False-Alarm (FA)")
"""The reward test set's categories, as its `category` field spells them."""


@dataclass(frozen=True)
class Counts:
    """Verdicts on proposals, with "accepted" as the positive class."""

    true_positive: int = 0
    """A task was proposed and accepted."""
    false_positive: int = 0
    """A task was proposed and rejected."""
    true_negative: int = 0
    """No task was proposed, and the judge agreed none was needed."""
    false_negative: int = 0
    """No task was proposed, and the judge said one was needed."""

    @property
    def total(self) -> int:
        return self.true_positive + self.false_positive + self.true_negative \
            + self.false_negative

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(self.true_positive + other.true_positive,
                      self.false_positive + other.false_positive,
                      self.true_negative + other.true_negative,
                      self.false_negative + other.false_negative)


def count_verdicts(pairs: Iterable[tuple[bool, bool]]) -> Counts:
    """Counts from (a task was proposed, the judge accepted) pairs, one per event."""
    tally = Counter(pairs)
    return Counts(true_positive=tally[(True, True)], false_positive=tally[(True, False)],
                  true_negative=tally[(False, True)], false_negative=tally[(False, False)])


def split_metrics(category: str, counts: Counts) -> dict[str, float | int | str]:
    """One row of upstream's results CSV for one split."""
    tp, fp, tn, fn = (counts.true_positive, counts.false_positive, counts.true_negative,
                      counts.false_negative)
    recall = tp / (tp + fn + EPSILON)
    precision = tp / (tp + fp + EPSILON)
    return {
        "Category": category,
        "Recall": recall,
        "Precision": precision,
        "Accuracy": (tp + tn) / (tp + tn + fp + fn + EPSILON),
        "False-Alarm": fp / (tp + fp + EPSILON),
        "F1-Score": 2 * precision * recall / (precision + recall + EPSILON),
        "Accept Rate": tp / (tp + fp + EPSILON),  # accepted proposals per proposal
        "Total Events": counts.total,
    }


@dataclass(frozen=True)
class CalibrationRow:
    """One labelled example of the reward test set, with the candidate judge's verdict."""

    category: str
    """One of CATEGORIES."""
    human_valid: bool
    """The human label: the proposal (or the absence of one) is right."""
    judge_accepted: bool | None
    """The candidate judge's verdict; None when its reply held none."""


def calibration(rows: Iterable[CalibrationRow]) -> dict[str, float | int | None]:
    """How a candidate judge agrees with people, with the authors' arithmetic: the agreement
    rate per category and overall, and accuracy, precision, recall and F1 of "accepted" against
    the human label. A missing verdict never agrees, and counts as a rejection in the
    confusion matrix, as in the authors' script; `no_verdict` says how many there were."""
    rows = list(rows)
    agree: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    tp = fp = tn = fn = 0
    for row in rows:
        seen[row.category] += 1
        agree[row.category] += row.judge_accepted is not None \
            and row.judge_accepted == row.human_valid
        if row.judge_accepted:
            tp, fp = (tp + 1, fp) if row.human_valid else (tp, fp + 1)
        else:
            fn, tn = (fn + 1, tn) if row.human_valid else (fn, tn + 1)

    def ratio(part: int, whole: int) -> float | None:
        return part / whole if whole else None

    result: dict[str, float | int | None] = {
        category: ratio(agree[category], seen[category]) for category in CATEGORIES}
    result.update({
        "agreement": ratio(sum(agree.values()), len(rows)),
        "accuracy": ratio(tp + tn, len(rows)), "precision": ratio(tp, tp + fp),
        "recall": ratio(tp, tp + fn), "f1": ratio(2 * tp, 2 * tp + fp + fn),
        "true_positive": tp, "false_positive": fp, "true_negative": tn, "false_negative": fn,
        "no_verdict": sum(row.judge_accepted is None for row in rows), "examples": len(rows)})
    return result
