"""Console handlers that write to the standard error of the moment, for in-process CLI runs.

Prefect configures its logging once per process: its console handler, on the root logger and
others, keeps the `sys.stderr` of the test whose CLI run configured it, and pytest closes that
captured stream when the test ends. Every later record then reaches a closed stream, and
Python's logging prints a traceback of its own for each (thousands of them, and minutes, where
a test logs every library at DEBUG), while the line the test looks for is lost. A process of
`proactflow` has one standard error for its whole life; this gives each test its own, as if it
were that process."""

from __future__ import annotations

import logging
import sys
from typing import Any


class CurrentStandardError:
    """A file object that is `sys.stderr` as it is at each write."""

    closed = False

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.stderr, name)


CURRENT = CurrentStandardError()


def follow_the_current_stderr() -> None:
    """Every console handler Prefect put on a logger now writes to the stderr of the moment."""
    loggers = [logging.getLogger(), *(logger for logger in
                                      list(logging.Logger.manager.loggerDict.values())
                                      if isinstance(logger, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if type(handler).__module__.startswith("prefect.") \
                    and isinstance(handler, logging.StreamHandler) and handler.stream is not CURRENT:
                handler.stream = CURRENT  # type: ignore[assignment]
                console = getattr(handler, "console", None)
                if console is not None:
                    console.file = CURRENT
