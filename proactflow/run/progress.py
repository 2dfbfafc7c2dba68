"""What a run says while it runs and how it judges itself at the end: a stage's progress in its
log, whether enough samples were scored to call the run a success, and Prefect's console lines
about a user-fixable failure without their traceback."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from ..common.errors import UserError
from ..config.settings import RunSettings
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


REFUSED = "refused"
"""The kind of lost coverage a re-run cannot win back: requests the server refused as sent."""


def located_causes(settings: RunSettings, causes: dict[str, str] | None) -> dict[str, str]:
    """The causes of lost coverage (`Suite.loss_causes`) with the model and endpoint whose calls
    failed, for the kinds that are one role's calls (a row's error names the server's
    sentence, not always where it came from)."""
    located = dict(causes or {})
    for kind, role in (("generation", settings.model_under_test), ("judge", settings.judge)):
        cause = located.get(kind)
        if cause is None or role is None or (role.endpoint and role.endpoint in cause):
            continue
        located[kind] = f"{role.model}{f' at {role.endpoint}' if role.endpoint else ''}: {cause}"
    return located


def coverage_problem(suite: Suite, coverage: tuple[int, int, dict[str, int]],
                     min_coverage: float | None,
                     causes: dict[str, str] | None = None) -> str | None:
    """Why a run's coverage (`Suite.coverage`) is too low to call it a success, or None. Nothing
    scored is always too low. With `min_coverage`, the share of samples scored must reach it;
    without, no sample may be lost to a failed or refused call (replies that are not answers
    are the model's answers, not failures). The message says what a re-run changes, and the
    cause the rows give for each kind of loss (`Suite.loss_causes`)."""
    scored, total, lost_by_kind = coverage
    if not total:
        return None
    causes = causes or {}

    def counted(kind: str, count: int) -> str:
        return f"{count} {kind}" + (f": {causes[kind]}" if causes.get(kind) else "")

    lasting = {kind: count for kind, count in lost_by_kind.items()
               if count and kind in suite.lasting_losses}
    retryable = {kind: count for kind, count in lost_by_kind.items()
                 if count and kind != REFUSED and kind not in lasting}
    refused = lost_by_kind.get(REFUSED, 0)
    why = []
    if retryable:
        kinds = "; ".join(counted(kind, count) for kind, count in retryable.items())
        why.append(f"{sum(retryable.values())} because calls failed ({kinds}): a re-run "
                   "retries only those (replies that could not be read are kept: a re-run "
                   "asks again past them with more --judge-attempts or --eval-attempts, or "
                   "with --refresh)")
    for kind, count in lasting.items():
        why.append(f"{counted(kind, count)}: {suite.lasting_losses[kind]}; a re-run as it is "
                   "will not change that")
    if refused:
        cause = causes.get(REFUSED) or ("too long for its context, or a parameter it does not "
                                        "take; the rows say which")
        why.append(f"{refused} refused by the server ({cause}): a re-run will not ask "
                   "them again; a larger context, another model or --judge-response-format, "
                   "then --refresh, can")
    reasons = "; ".join(why)
    if scored == 0:
        rest = reasons or ("every reply was not an answer (empty, cut off or blocked: the "
                           "rows say which): a re-run will not change that")
        return f"nothing scored: 0 of {total} {suite.sample_noun}: {rest}"
    if min_coverage is not None:
        if scored / total < min_coverage:
            return (f"coverage {scored}/{total} {suite.sample_noun} scored ({scored / total:.1%}) "
                    f"is below --min-coverage {min_coverage:.1%}"
                    + (f" ({reasons})" if reasons else ""))
        return None
    if why:
        lost = sum(retryable.values()) + sum(lasting.values()) + refused
        return (f"{lost} of {total} {suite.sample_noun} not scored: {reasons}; or accept "
                "with --min-coverage")
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


class _StandardError(logging.StreamHandler):
    """Writes to the standard error of the moment (a test may have replaced it since)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def log_stages_to_console() -> None:
    """A run that reports to no Prefect server: its stages' progress (the loggers under
    `proactflow`, named after the table each stage writes) goes to standard error, time, level,
    stage and message, as Prefect's console would show it."""
    logger = logging.getLogger("proactflow")
    logger.setLevel(logging.INFO)
    if not any(isinstance(handler, _StandardError) for handler in logger.handlers):
        handler = _StandardError()
        handler.setFormatter(logging.Formatter(
            "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)


def quiet_console_tracebacks() -> None:
    from prefect.logging.configuration import setup_logging

    setup_logging()
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _NoUserErrorTraceback) for f in handler.filters):
            handler.addFilter(_NoUserErrorTraceback())
