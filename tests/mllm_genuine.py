"""The genuine proactivebench 0.1.1 for tests: a throw-away venv under pyenv's Python 3.12.1
(the package needs 3.12) and the pinned wheel, cached across runs under ~/.cache/proactflow-tests.
Where either cannot be had the test is skipped with the reason, and fails under CI=true."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from proactflow.common.errors import UserError
from proactflow.suites.proactivebench_mllm.upstream import VERSION, Upstream, fetch_wheel, read_wheel

CACHE = Path.home() / ".cache" / "proactflow-tests" / f"proactivebench-{VERSION}-py3.12.1"
PIP_TIMEOUT_S = 600


def unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def python312() -> Path:
    root = os.environ.get("PYENV_ROOT")
    if not root:
        try:
            root = subprocess.run(["pyenv", "root"], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            root = ""
    return Path(root or Path.home() / ".pyenv") / "versions" / "3.12.1" / "bin" / "python"


def pinned_upstream() -> Upstream:
    """The pinned wheel's data: cached, or downloaded with pip once."""
    try:
        return read_wheel(fetch_wheel(CACHE / "store"), f"proactivebench=={VERSION}")
    except UserError as exc:
        unavailable(f"cannot fetch the pinned proactivebench wheel: {exc}")
        raise


def _build_venv(python: Path) -> None:
    # Built beside, then moved into the cache folder whole: the folder itself may already be
    # there (pinned_upstream keeps the wheel in it), so the venv, not the folder, is renamed.
    CACHE.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix="building-", dir=CACHE))
    try:
        subprocess.run([str(python), "-m", "venv", str(build / "venv")], check=True,
                       capture_output=True, timeout=PIP_TIMEOUT_S)
        done = subprocess.run(
            [str(build / "venv" / "bin" / "python"), "-m", "pip", "install", "-q",
             "--no-deps", f"proactivebench=={VERSION}", "pillow", "attrs", "jsonlines"],
            capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        if done.returncode != 0:
            unavailable("cannot install the genuine package: "
                        + (done.stderr.strip().splitlines() or ["?"])[-1])
        try:
            os.rename(build / "venv", CACHE / "venv")  # another process may have won: fine
        except OSError:
            pass
        if (CACHE / "venv" / "bin" / "python").exists():
            (CACHE / "READY").write_text("ok\n")
    finally:
        shutil.rmtree(build, ignore_errors=True)


@pytest.fixture(scope="session")
def genuine(tmp_path_factory):
    """(the Python of a venv holding the genuine package, a copy of the pinned wheel)."""
    python = python312()
    if not python.is_file():
        unavailable(f"needs pyenv's Python 3.12.1 ({python}) to run the genuine package")
    if not (CACHE / "READY").is_file():
        _build_venv(python)
    try:
        wheel = fetch_wheel(CACHE / "store")
    except UserError as exc:
        unavailable(f"cannot fetch the pinned proactivebench wheel: {exc}")
    wheel_file = tmp_path_factory.mktemp("wheel") / "proactivebench.whl"
    wheel_file.write_bytes(wheel)
    return CACHE / "venv" / "bin" / "python", wheel_file
