"""The `proactflow` command.

Every user-fixable problem (bad corpus line, missing key, unreachable endpoint, no cached
responses) is found before the first paid call and printed as one line, with exit status 2. A
database that goes away mid-run and stays away longer than --database-wait is one line too,
with exit status 1: calls may have been paid by then. Ctrl-C: one line and exit status 130
(cli/interrupts.py).

This module imports little: the parser and what it pulls in (a third of a second) are
imported by `main`, after Ctrl-C is handled, so that a Ctrl-C at any moment of the command is
one line, not a traceback.
"""

from __future__ import annotations

import sys
from typing import Any

from ..common.errors import DatabaseLost, UserError
from .interrupts import (EXIT_DATABASE_LOST, EXIT_INTERRUPTED, EXIT_LOW_COVERAGE,
                         EXIT_USER_ERROR, handle_interrupts, interrupted)

__all__ = ["EXIT_DATABASE_LOST", "EXIT_INTERRUPTED", "EXIT_LOW_COVERAGE", "EXIT_USER_ERROR",
           "build_parser", "main", "settings_from_args"]


def __getattr__(name: str) -> Any:
    if name == "build_parser":
        from .parser import build_parser
        return build_parser
    if name == "settings_from_args":
        from .options import settings_from_args
        return settings_from_args
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """The command; `argv` None for the command line itself (its process's Ctrl-C is then
    handled here), a list for a caller inside a process of its own, such as a test."""
    from ..common.process import tune_process

    tune_process()  # the process's entry: before any import of litellm
    if argv is None:
        handle_interrupts()
    try:
        from .parser import build_parser

        args = build_parser().parse_args(argv)
        return args.handler(args)
    except DatabaseLost as exc:  # mid-run: calls may have been paid, so not a user error's 2
        print(f"proactflow: error: {exc}", file=sys.stderr)
        return EXIT_DATABASE_LOST
    except UserError as exc:
        print(f"proactflow: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        interrupted()
        return EXIT_INTERRUPTED
