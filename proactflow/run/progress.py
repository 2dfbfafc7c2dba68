"""What a run says while it runs and how it judges itself at the end: a stage's progress in its
log, whether enough samples were scored to call the run a success, and Prefect's console lines
about a user-fixable failure without their traceback."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..common.errors import UserError
from ..suites.base import Suite

Logger = logging.Logger | logging.LoggerAdapter


class Progress:
    """Logs `done/total` of a stage now and then: every 10 % (at least 10 rows) or 15 s. A
    total of None (an interactive suite's steps, known only as they are taken): `done` alone,
    every 100 rows or 15 s."""

    def __init__(self, logger: Logger, label: str, total: int | None,
                 failed: tuple[str, ...]):
        self.logger, self.label, self.total, self._failed = logger, label, total, failed
        self.done = self.failed = 0
        self._last_time = time.monotonic()
        self._last_done = 0

    def __call__(self, row: Any) -> None:
        self.done += 1
        if row.status in self._failed:
            self.failed += 1
        now = time.monotonic()
        step = 100 if self.total is None else max(10, self.total // 10)
        if self.done == self.total or self.done - self._last_done >= step \
                or now - self._last_time >= 15:
            if self.total is None:
                self.logger.info("%s: %d steps done, %d failed", self.label, self.done,
                                 self.failed)
            else:
                self.logger.info("%s: %d/%d done, %d failed", self.label, self.done,
                                 self.total, self.failed)
            self._last_time, self._last_done = now, self.done


def coverage_problem(suite: Suite, coverage: tuple[int, int, dict[str, int]],
                     min_coverage: float | None) -> str | None:
    """Why a run's coverage (`Suite.coverage`) is too low to call it a success, or None. With
    `min_coverage`, the share of samples scored must reach it; without, no sample may be lost
    to a failed call (replies that are not answers are the model's answers, not failures)."""
    scored, total, lost_by_kind = coverage
    if not total:
        return None
    if min_coverage is not None:
        if scored / total < min_coverage:
            return (f"coverage {scored}/{total} {suite.sample_noun} scored ({scored / total:.1%}) "
                    f"is below --min-coverage {min_coverage:.1%}")
        return None
    lost = sum(lost_by_kind.values())
    if lost:
        kinds = ", ".join(f"{count} {kind}" for kind, count in lost_by_kind.items())
        return (f"{lost} of {total} {suite.sample_noun} not scored because calls failed "
                f"({kinds}): re-run to retry them, or accept with --min-coverage")
    return None


class _NoUserErrorTraceback(logging.Filter):
    """Keeps Prefect's console lines about a user-fixable failure (and about the stage stopped by
    it) but drops the traceback: the CLI ends with the one-line error. The Prefect UI still gets
    the full record."""

    def filter(self, record: logging.LogRecord) -> bool:
        from ..stages.streaming import StageAborted

        if record.exc_info and isinstance(record.exc_info[1], (UserError, StageAborted)):
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_console_tracebacks() -> None:
    from prefect.logging.configuration import setup_logging

    setup_logging()
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _NoUserErrorTraceback) for f in handler.filters):
            handler.addFilter(_NoUserErrorTraceback())
