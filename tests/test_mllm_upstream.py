"""Reading the package's data out of its wheel with `ast`, never running it: on synthetic wheels
made here (the real one is read in the differential and golden tests)."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest

from proactflow.cache.artifacts import ArtifactStore
from proactflow.common.errors import UserError
from proactflow.suites.proactivebench_mllm.upstream import (VERSION, WHEEL_NAME, fetch_wheel,
                                                            load_upstream)

LOADER = """import torch
raise SystemExit("a module read as data must never run")
FILTER = {"Realistic-Occlusion-Dataset": [0, 1], "OcclusionDataSet-MM20": [3],
          "MVP-N": [], "ImageNet-C": [7], "QuickDraw": [1, 2], "ChangeIt": [], "coco2014": [9]}
FILTER = {**FILTER}  # not a literal: the last binding wins, and is refused
"""
JUDGE = """SYSTEM_PROMPT = 'synthetic system text'
USER_PROMPT = "Q={user_prompt} A={correct_answers} O={generated_answer}"
PREDICTION_THR = {"ROD": 2, "VSOD": 3, "MVP-N": 2, "IN-C": 1, "QD": 1, "CIT": 2, "COCO": 2}
"""


PLAIN_LOADER = LOADER.replace("FILTER = {**FILTER}  # not a literal: the last binding wins, "
                              "and is refused\n", "")


def wheel(loader: str, judge: str = JUDGE) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("proactivebench/data_utils.py", loader)
        archive.writestr("proactivebench/open_ended_gen.py", judge)
    return buffer.getvalue()


def test_literals_are_read_without_running_the_module(tmp_path):
    data = wheel(PLAIN_LOADER)
    path = tmp_path / WHEEL_NAME
    path.write_bytes(data)
    upstream = load_upstream(wheel_file=path, expected_sha256=hashlib.sha256(data).hexdigest())
    assert upstream.filter["QuickDraw"] == frozenset({1, 2})
    assert upstream.prediction_thr["VSOD"] == 3
    assert upstream.user_prompt.startswith("Q={user_prompt}")


def test_a_non_literal_a_wrong_hash_and_a_missing_name_are_refused(tmp_path):
    data = wheel(LOADER)
    path = tmp_path / "w.whl"
    path.write_bytes(data)
    with pytest.raises(UserError, match="FILTER is not a literal"):
        load_upstream(wheel_file=path, expected_sha256=hashlib.sha256(data).hexdigest())
    with pytest.raises(UserError, match="has sha256 .*: refusing to use it"):
        load_upstream(wheel_file=path)
    other = wheel(PLAIN_LOADER, judge="SYSTEM_PROMPT = 'x'\n")
    path.write_bytes(other)
    with pytest.raises(UserError, match="open_ended_gen.py defines no USER_PROMPT"):
        load_upstream(wheel_file=path, expected_sha256=hashlib.sha256(other).hexdigest())


def test_the_store_serves_a_cached_wheel_and_pip_failures_are_one_line(tmp_path, monkeypatch):
    data = wheel(LOADER)
    digest = hashlib.sha256(data).hexdigest()
    store = ArtifactStore(tmp_path / "store")
    store.write_input(f"proactivebench/{VERSION}/{WHEEL_NAME}", data)
    assert fetch_wheel(store, expected_sha256=digest) == data
    # Nothing to download from: pip fails, and says so in one line.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(UserError, match=r"cannot download proactivebench==0.1.1 with pip") as err:
        fetch_wheel(ArtifactStore(tmp_path / "empty"))
    assert "\n" not in str(err.value)
