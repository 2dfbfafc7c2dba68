"""Importing proactflow makes the collector run less often, never more often."""

from __future__ import annotations

import gc

import proactflow  # noqa: F401  (tunes the collector on import)
from proactflow.common import gcpolicy


def test_thresholds_are_raised_and_never_lowered(monkeypatch):
    assert gc.get_threshold()[0] >= gcpolicy.THRESHOLDS[0]
    saved = gc.get_threshold()
    try:
        gc.set_threshold(50_000, 20, 20)
        gcpolicy.tune()
        assert gc.get_threshold() == (50_000, 20, 20)
        gc.set_threshold(700, 10, 10)
        gcpolicy.tune()
        assert gc.get_threshold() == gcpolicy.THRESHOLDS
    finally:
        gc.set_threshold(*saved)
