"""Benchmarks, one folder each, behind the seam of suites/base.py.

A suite is found by name: the ones shipped with proactflow, one registered in the running process
(`register_suite`, as the tests do), or one installed by another package under the
`proactflow.suites` entry-point group (`name = "package.module:SuiteClass"`). Suite modules are
imported only when asked for, so naming a suite costs nothing until it is used.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from ..common.errors import UserError

if TYPE_CHECKING:
    from .base import Suite
    from .command_line import CommandLine


_BUILT_IN = {
    "proactbench": "proactflow.suites.proactbench.suite:ProactBench",
    "proactiveagent": "proactflow.suites.proactiveagent.suite:ProactiveAgent",
    "proactivebench-mllm": "proactflow.suites.proactivebench_mllm.suite:ProactiveBenchMllm",
    "proactiveagent-calibration":
        "proactflow.suites.proactiveagent.calibration:JudgeCalibration",
    "proactivebench-video": "proactflow.suites.proactivebench_video.suite:ProactiveBenchVideo",
}
_COMMAND_LINE = ("proactflow.suites.proactivebench_video.options",
                 "proactflow.suites.proactivebench_mllm.options",
                 "proactflow.suites.proactiveagent.options")
"""The built-in suites' additions to the evaluation commands (light modules: see
command_line.py)."""
_registered: dict[str, "Suite"] = {}
_loaded: dict[str, "Suite"] = {}


def register_suite(suite: "Suite") -> None:
    """Make a suite available by its name in this process."""
    _registered[suite.name] = suite


def _entry_points() -> dict[str, str]:
    return {point.name: point.value for point in entry_points(group="proactflow.suites")}


def suite_names() -> list[str]:
    return sorted({*_BUILT_IN, *_registered, *_entry_points()})


def found_by_other_processes(name: str) -> bool:
    """Whether a fresh Python process finds the suite by name (built in or an entry point), not
    only this one (`register_suite`): a sweep runs pairs in other processes only then."""
    return name in _BUILT_IN or name in _entry_points()


def get_suite(name: str) -> "Suite":
    """The suite called `name`; a one-line UserError listing the known ones otherwise."""
    if name in _registered:
        return _registered[name]
    if name in _loaded:
        return _loaded[name]
    target = _BUILT_IN.get(name) or _entry_points().get(name)
    if target is None:
        raise UserError(f"unknown suite {name!r}: known suites are {', '.join(suite_names())}")
    module_name, _, attribute = target.partition(":")
    suite = getattr(importlib.import_module(module_name), attribute)()
    _loaded[name] = suite
    return suite


def command_lines() -> list["CommandLine"]:
    """What the built-in suites add to the evaluation commands' parsers, in a fixed order."""
    return [importlib.import_module(module).COMMAND_LINE for module in _COMMAND_LINE]
