"""Settings read from the environment: a number of seconds a user may set."""

from __future__ import annotations

import math
import os

from .errors import UserError


def seconds_from_environment(name: str, default: float, *, zero_allowed: bool,
                             expected: str) -> float:
    """The seconds environment variable `name` holds, `default` when it is unset or blank; a
    one-line UserError, "`name`='value': `expected`", when it is not a finite number of
    seconds (0 counts only when `zero_allowed`)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero_allowed):
        raise UserError(f"{name}={text!r}: {expected}")
    return seconds
