"""Errors a user can fix. The CLI prints them as one line, without a traceback."""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix: bad input, missing key, unreachable endpoint."""


class CorpusError(UserError):
    """A corpus file that does not hold valid ProactBench rows."""

    def __init__(self, source: str, line: int | None, problem: str):
        self.source, self.line, self.problem = source, line, problem
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {problem}")


class ProviderRejected(UserError):
    """The provider refused every call (bad key, unknown model): stop instead of retrying."""


class EndpointDown(UserError):
    """Calls keep failing with retryable errors and none succeeds: stop instead of waiting hours."""


class DatabaseLost(UserError):
    """The database went away mid-run and did not come back within the wait: the run stops
    with one line and exit status 1 (calls may have been paid; their answers are kept)."""
