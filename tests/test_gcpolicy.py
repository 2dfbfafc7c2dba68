"""Importing proactflow changes nothing outside it; the command's entry makes the collector run
less often, never more often, and keeps litellm's bundled price map."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

from proactflow.common import gcpolicy
from proactflow.common.process import COST_MAP_ENV, tune_process

IMPORTS = ["proactflow", "proactflow.suites.base", "proactflow.suites.declarations",
           "proactflow.suites.sources", "proactflow.suites.presentation",
           "proactflow.config.settings", "proactflow.schemas.arrow",
           "proactflow.providers.llm", "proactflow.results.history.nights"]
"""The package and the public modules a suite of one's own imports."""


def test_an_import_leaves_the_collector_the_environment_and_litellm_as_they_were():
    # The libraries proactflow builds on first, litellm with its bundled price map (no hub):
    # what their own imports set (polars sets jemalloc's configuration variable) is theirs.
    # Then the variable goes, to see that no proactflow import sets it again.
    script = ("import gc, importlib, json, os, sys\n"
              "import polars, pyarrow, pydantic, litellm, litellm.utils\n"
              f"del os.environ[{COST_MAP_ENV!r}]\n"
              "from litellm.litellm_core_utils.litellm_logging import Logging\n"
              "def state():\n"
              "    return [gc.get_threshold(), dict(os.environ), litellm.suppress_debug_info,\n"
              "            repr(Logging.response_cost_calculator),\n"
              "            repr(litellm.utils.dispatch_success_logging)]\n"
              "before = state()\n"
              f"for name in {IMPORTS!r}:\n"
              "    importlib.import_module(name)\n"
              "print(json.dumps([before, state()]))\n")
    env = {**os.environ, COST_MAP_ENV: "True"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=240, check=True).stdout
    before, after = json.loads(out.splitlines()[-1])
    assert COST_MAP_ENV not in after[1]
    assert after == before


def test_the_entry_raises_thresholds_never_lowers_them_and_keeps_a_users_price_map(
        monkeypatch):
    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        monkeypatch.delenv(COST_MAP_ENV, raising=False)
        tune_process()
        assert gc.get_threshold() == gcpolicy.THRESHOLDS
        assert os.environ[COST_MAP_ENV] == "True"
        gc.set_threshold(50_000, 20, 20)
        monkeypatch.setenv(COST_MAP_ENV, "False")
        tune_process()
        assert gc.get_threshold() == (50_000, 20, 20)
        assert os.environ[COST_MAP_ENV] == "False"  # the user's choice stays
    finally:
        gc.set_threshold(*saved)


def test_the_command_sets_its_process_up_first(tmp_path):
    """The command's entry, in a fresh process without the variable: litellm's bundled price
    map and the collector's thresholds are set when the command starts, so before any import
    of litellm a command makes (tests/test_offline.py: no hub is called)."""
    script = ("import gc, os, sys\n"
              "from proactflow.cli import main\n"
              f"assert main(['runs', 'ls', '--store', {str(tmp_path / 'store')!r}]) == 0\n"
              f"print(os.environ.get({COST_MAP_ENV!r}), gc.get_threshold()[0])\n")
    env = {k: v for k, v in os.environ.items() if k != COST_MAP_ENV}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=240, check=True).stdout
    assert out.splitlines()[-1] == f"True {gcpolicy.THRESHOLDS[0]}"
