"""What a suite adds to the evaluation commands (run, rejudge, status and a command of its
own): declared in a light module of the suite's folder (argparse calls only: the parser is
built at every start of `proactflow`, before any suite is imported), listed in
suites/__init__.py. cli/ adds them to its parsers without knowing whose they are."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class SuiteCommand:
    """A command of its own a suite brings (the calibration suite's `calibrate`): the
    evaluation commands' options with the model under test fixed by `defaults`."""

    name: str
    summary: str
    defaults: dict[str, Any]
    """Parser defaults in place of the options a user gives `run` (--suite, --eval-model...)."""
    corpus_help: str
    """--corpus's help for this command."""


@dataclass(frozen=True)
class CommandLine:
    """One suite's additions to the evaluation commands' parsers."""

    corpus_options: Callable[[Any], None] | None = None
    """Adds the suite's options choosing its data to the commands' "corpus" group."""
    option_group: Callable[[argparse.ArgumentParser], None] | None = None
    """Adds a group of the suite's own options to a command's parser (after the corpus group)."""
    commands: tuple[SuiteCommand, ...] = field(default=())
    imports_published: tuple[str, ...] = ()
    """Suites (by name) whose published results `proactflow import --suite NAME` stores,
    besides the default suite's."""
