"""The package type-checks: every import resolves for static tools as it does at run time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "proactflow-tests" / "mypy"
"""mypy's cache, kept with the machine's other test caches instead of in the clone: a fresh clone
on a machine that ran the tests before checks again only the modules whose content changed
(mypy compares each file's hash when its path or time differs, so a stale or shared cache costs
time, never a verdict). Without it the check is about 70 s of CPU on the 2-core CI machine,
most of it reading Prefect, litellm and polars."""


def test_mypy_finds_no_error_in_the_package():
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(CACHE),
                           "-p", "proactflow"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout
