"""The `proactflow` command.

Every user-fixable problem (bad corpus line, missing key, unreachable endpoint, no cached
responses) is found before the first paid call and printed as one line, with exit status 2. A
database that goes away mid-run and stays away longer than --database-wait is one line too,
with exit status 1: calls may have been paid by then.
"""

from __future__ import annotations

import sys

from ..common.errors import DatabaseLost, UserError
from .options import (EXIT_DATABASE_LOST, EXIT_INTERRUPTED, EXIT_LOW_COVERAGE, EXIT_USER_ERROR,
                      settings_from_args)
from .parser import build_parser

__all__ = ["EXIT_DATABASE_LOST", "EXIT_INTERRUPTED", "EXIT_LOW_COVERAGE", "EXIT_USER_ERROR", "build_parser", "main",
           "settings_from_args"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except DatabaseLost as exc:  # mid-run: calls may have been paid, so not a user error's 2
        print(f"proactflow: error: {exc}", file=sys.stderr)
        return EXIT_DATABASE_LOST
    except UserError as exc:
        print(f"proactflow: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("proactflow: interrupted. Finished calls are cached: run the same command again "
              "to continue.", file=sys.stderr)
        return EXIT_INTERRUPTED
