"""Proactive Agent's additions to the command line (suites/command_line.py): a command of its
own, `calibrate` (its calibration suite scores a candidate judge against the human-labelled
reward test set), and `import --suite proactiveagent` (the authors' published traces)."""

from __future__ import annotations

from ..command_line import CommandLine, SuiteCommand
from .calibration_names import CALIBRATION, LABELLED

COMMAND_LINE = CommandLine(commands=(SuiteCommand(
    "calibrate",
    "score a candidate judge against ProactiveBench's human-labelled reward test set (the "
    "authors' reward-model table: agreement per category, accuracy, precision, recall, F1), "
    "cached like a run",
    # The "model under test" is the labelled test set: its proposals are the data.
    defaults=dict(suite=CALIBRATION, eval_model=LABELLED, eval_api_base=None,
                  eval_api_key_env=None),
    corpus_help="a reward test file in the benchmark's JSON-lines shape (default: "
                "dataset/reward_data/test_data.jsonl at the pinned upstream commit)"),),
    imports_published=("proactiveagent",))
