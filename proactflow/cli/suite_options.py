"""Options one suite takes and the others refuse: --parts (the video ProactiveBench) and the
multimodal ProactiveBench's --datasets, --mode, --hint, --reference and --package."""

from __future__ import annotations

import argparse
from typing import Any

from ..common.errors import UserError


def parts_from_args(args: argparse.Namespace, suite: Any) -> tuple[str, ...] | None:
    """--parts, for a suite with parts only (the video ProactiveBench)."""
    value = getattr(args, "parts", None)
    if value is None:
        return None
    if not suite.takes_parts:
        raise UserError(f"--parts is the video ProactiveBench's (--suite proactivebench-video); "
                        f"{suite.name} has none")
    return suite.parse_parts(value)


SUITE_OPTIONS = {"datasets": "--datasets", "mode": "--mode", "hint": "--hint",
                 "reference": "--reference", "package": "--package",
                 "skip_undecodable": "--skip-undecodable-videos"}
"""A suite's own options: their RunSettings.suite_options name and their flag."""


def suite_options_from_args(args: argparse.Namespace, suite) -> dict[str, str | bool]:
    """The suite options given on the command line; one the suite does not take is a one-line
    UserError (silently ignoring it would run another evaluation than the one asked for)."""
    given = {name: getattr(args, name) for name in SUITE_OPTIONS
             if getattr(args, name, None) not in (None, False)}
    refused = [SUITE_OPTIONS[name] for name in given if name not in suite.option_names]
    if refused:
        raise UserError(f"{', '.join(refused)}: not an option of the {suite.name} suite")
    return given
