"""What an option's value may be: argparse `type=` checks turning one command-line word into a
number, a phase list, an age, a store location, a NAME=FILE pair, a batch mode. Apart from the
options themselves (options.py) because they hold no help text and no knowledge of a command:
each is a pure check, its mistake one line from argparse."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from ..config.generation import MAX_TOKENS_CEILING, TEMPERATURE_MAX


def optional_float(text: str) -> float | None:
    if text.lower() in ("none", "null", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from None


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of 0 or more, got {text!r}")
    return value


def fraction(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.95 or 95%, "
                                         f"got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction from 0 to 1, got {text!r}")
    return value


def optional_str(text: str) -> str | None:
    return None if text.lower() in ("none", "null", "off") else text


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, got {value}")
    return value


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """A whole number from `low` to `high`, as the settings it becomes take it: a value beyond
    them is one line here, not a validation traceback after the option checks."""
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, "
                                             f"got {value}")
        return value
    check.__name__ = f"whole number from {low} to {high}"
    return check


def number_up_to(high: float) -> Callable[[str], float]:
    """A number from 0 to `high`."""
    def check(text: str) -> float:
        value = non_negative_float(text)
        if value > high:
            raise argparse.ArgumentTypeError(f"expected a number from 0 to {high:g}, "
                                             f"got {text!r}")
        return value
    check.__name__ = f"number from 0 to {high:g}"
    return check


def temperature(text: str) -> float | None:
    """A sampling temperature, 0 to 2 (the widest range providers take), or 'none'."""
    value = optional_float(text)
    if value is not None and not 0 <= value <= TEMPERATURE_MAX:
        raise argparse.ArgumentTypeError(f"expected a temperature from 0 to "
                                         f"{TEMPERATURE_MAX:g}, or 'none', got {text!r}")
    return value


def top_p(text: str) -> float | None:
    """A nucleus-sampling mass, above 0 and at most 1 (0 keeps no token), or 'none'."""
    value = optional_float(text)
    if value is not None and not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a top_p above 0 and at most 1, or 'none', "
                                         f"got {text!r}")
    return value


def max_tokens(text: str) -> int:
    return whole_number(1, MAX_TOKENS_CEILING)(text)


def phases_list(text: str) -> tuple[str, ...]:
    phases = tuple(p.strip().upper() for p in text.split(",") if p.strip())
    unknown = [p for p in phases if p not in ("EMERGENT", "CRITICAL", "RECOVERY")]
    if unknown or not phases:
        raise argparse.ArgumentTypeError(
            f"phases are EMERGENT, CRITICAL, RECOVERY (comma-separated); got {text!r}")
    return phases


def age(text: str):
    from ..results.upkeep.gc import parse_age

    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def judge_list(text: str) -> list[str]:
    judges = [j.strip() for j in text.split(",") if j.strip()]
    if len(judges) < 2 or len(set(judges)) != len(judges):
        raise argparse.ArgumentTypeError(f"expected two or more distinct judges, got {text!r}")
    return judges


def store_location(text: str) -> str:
    from ..config.settings import check_store

    try:
        return check_store(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

def prompt_file(value: str) -> tuple[str, str]:
    """NAME=FILE of --prompt."""
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE, got {value!r}")
    if not Path(path).expanduser().is_file():
        raise argparse.ArgumentTypeError(f"prompt file not found: {path}")
    return name, path


def batch_mode(text: str) -> str:
    if text not in ("on", "auto"):
        raise argparse.ArgumentTypeError(f"--batch takes nothing or 'auto', not {text!r}")
    return text
