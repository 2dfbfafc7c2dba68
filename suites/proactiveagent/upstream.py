"""The benchmark's own files at the pinned commit of thunlp/ProactiveAgent, and its prompts.

Data and prompts are downloaded once, checked against the sha256 pinned below (computed from
the repository at that commit) and cached in the store, so a changed or truncated file is
refused instead of measured. The four prompt texts are benchmark data, never part of this
project: they are read out of upstream's two Python modules with `ast`, without running them,
and each is checked against its own pinned hash. `read_prompt_file` loads a user's alternative.
"""

from __future__ import annotations

import ast
import hashlib
import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ...cache.artifacts import ArtifactStore
from ...cache.keys import text_sha256
from ...common.errors import UserError
from .. import sources
from ...common.network import unreachable
from .data import (RewardTestRow, TraceEvent, parse_reward_test_set, parse_splits, parse_trace,
                   split_membership, trace_name)

UPSTREAM_REPO = "thunlp/ProactiveAgent"
UPSTREAM_COMMIT = "50940be8cdf76f3149e780a2fa8768b0b5d135b1"
UPSTREAM_URL_ENV = "PROACTFLOW_PROACTIVEAGENT_URL"
UPSTREAM_URL = "https://raw.githubusercontent.com/thunlp/ProactiveAgent/{commit}/{path}"

SPLITS_PATH = "dataset/test_data/splits.json"
REWARD_TEST_PATH = "dataset/reward_data/test_data.jsonl"
AGENT_MODULE = "eval/script.py"
REWARD_MODULE = "eval/reward_model_template.py"

UPSTREAM_SHA256 = {
    SPLITS_PATH: "8ab113d862e0e5210564a3ac4d11dcce84682540b31f91c05bf4230a3fe98b3d",
    "dataset/test_data/code_11.json":
        "c5c4f0635a207df8248a190760c23af3f23096fc67edaa9e4ec15b934e99bdd7",
    "dataset/test_data/code_12.json":
        "416028bc0fb747b3322592950f718933dac81ed8cae05aa53d71f972ebaf62aa",
    "dataset/test_data/code_13.json":
        "cd6fb734b318272a2f711648b97f0602bf57c237903d8605db2c967f6200214e",
    "dataset/test_data/code_14.json":
        "c2e1810639846588bd026ed3e0470f0a55dfdc6f8cfa3b9eeb56b5401e306c1b",
    "dataset/test_data/code_15.json":
        "de4b9e93c91e969d6094dac159ec5eb9b325c68e2b823f6ba129cc706fe38087",
    "dataset/test_data/code_16.json":
        "0f8feeff9c7755884df8f0753fe58d42b4f00d141ca11d990694e7dc7e9670ad",
    "dataset/test_data/writing_11.json":
        "8033aeef485660a37e36974ff1706c436a02b45db9376d553df5e125882ff074",
    "dataset/test_data/writing_12.json":
        "8d94eb9a5e39a94e129d3ad53b49e1ff2bead571d07fcb04b1c489abc74d0667",
    "dataset/test_data/writing_13.json":
        "35440bb20735c510ec2301a1968472a305dfbff99b75ef2cb8204f754683bb75",
    "dataset/test_data/writing_14.json":
        "3f289083738febd44d9f212a5c3d08c916ea6f56744ac52165bd5028cacd5858",
    "dataset/test_data/writing_15.json":
        "5d5cfa5e45894469458614bb8b260458b84c07a67033082a667f7026e06b14ec",
    "dataset/test_data/writing_16.json":
        "0f97f544da9353e55fe17e7ea5e1cb6d27dd50f2ff1fd74a729a2782d879c213",
    REWARD_TEST_PATH: "1ce3c041f6ed5e4de1122ef18e71fa151b340b23247737ee7991b00c83978224",
    AGENT_MODULE: "ca30d328b3986386deba8c833754cbb5c9b501b8506142283768ca77bbf62d18",
    REWARD_MODULE: "b46dc883cdbd4380256382e9167ce2d5b2cd98f05dd015a31c602d86fdfa4050",
}
"""sha256 of the bytes of every file the suite reads, at UPSTREAM_COMMIT."""

# Where each prompt lives: (module, top-level name, key of a dict literal inside it or None for
# the name's own string value), and the sha256 of its UTF-8 text.
PROMPT_LOCATIONS = {
    "agent_system": (AGENT_MODULE, "SYSTEM", None),
    "step_instruction": (AGENT_MODULE, "STEP", "Instructions"),
    "reward_system": (REWARD_MODULE, "SYSTEM", None),
    "reward_instruction": (REWARD_MODULE, "format_reward_instruction", "Instruction"),
}
PROMPT_SHA256 = {
    "agent_system": "abe8fc9540cbee6d305d0d81afbd2ff2e0711920091e3aa037d7816df47534e9",
    "step_instruction": "b8d1fd4f2495652a358f00e160345c7dd5a9279869ba046a3e13175262c2356b",
    "reward_system": "17c8f9a4507a6c7356c2c7e7ee986568605d4bcf79092ba4200da6ab2ac9e570",
    "reward_instruction": "bf2056f9176fc7bc79eae038c02446a3d26412fd3451751990d03602901fee29",
}
_HINTS = {
    "dataset/test_data/": "pass a local ProactiveBench test-data folder",
    "dataset/reward_data/": "pass a local reward test file",
    "eval/": "pass prompt files of your own (--eval-system-prompt-file, --judge-prompt, "
             "--prompt agent_instruction=FILE, --prompt judge_instruction=FILE)",
}


def _where(path: str, commit: str) -> str:
    return f"{UPSTREAM_REPO}@{commit[:12]}:{path}"


def fetch_upstream_file(store: ArtifactStore | Path | str, path: str,
                        expected_sha256: str | None = None,
                        commit: str = UPSTREAM_COMMIT, hint: str | None = None) -> bytes:
    """A file of the benchmark's repository at `commit`: from the store's inputs, or downloaded
    once. Its bytes must have `expected_sha256` (by default the pinned one), else nothing is
    kept. A store may be given as its root. `hint` says what to do instead when it cannot be
    downloaded (by default, what the file's folder usually calls for)."""
    expected = expected_sha256 or UPSTREAM_SHA256.get(path)
    if expected is None:
        raise ValueError(f"no pinned sha256 for {path}: pass expected_sha256")
    if not isinstance(store, ArtifactStore):
        store = ArtifactStore(store)
    cached_name = f"proactiveagent/{commit}/{path}"
    data = store.read_input(cached_name)
    if data is not None and hashlib.sha256(data).hexdigest() == expected:
        return data
    hint = hint or next((h for prefix, h in _HINTS.items() if path.startswith(prefix)),
                        "use local files")
    url = os.environ.get(UPSTREAM_URL_ENV, UPSTREAM_URL).format(commit=commit, path=path)
    offline = unreachable(url)
    if offline:
        raise UserError(f"cannot download {_where(path, commit)} (no network: {offline}); "
                        f"{hint}, or run once with a network to cache it")
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            data = response.read()
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(f"cannot download {_where(path, commit)} from {url} ({reason}); "
                        f"{hint}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise UserError(f"{_where(path, commit)} has sha256 {digest[:16]}..., expected "
                        f"{expected[:16]}...: refusing to use it")
    store.write_input(cached_name, data)
    return data


def load_upstream_corpus(store: ArtifactStore | Path) -> tuple[list[TraceEvent], dict[str, list[str]]]:
    """The test traces named by the pinned splits.json, as `data.read_local_corpus` returns a
    local folder's."""
    folder = SPLITS_PATH.rsplit("/", 1)[0]
    splits = parse_splits(fetch_upstream_file(store, SPLITS_PATH),
                          _where(SPLITS_PATH, UPSTREAM_COMMIT))
    events: list[TraceEvent] = []
    for file_name, names in split_membership(splits).items():
        path = f"{folder}/{file_name}"
        if path not in UPSTREAM_SHA256:
            raise UserError(f"{_where(SPLITS_PATH, UPSTREAM_COMMIT)} names {file_name}, which "
                            "has no pinned sha256")
        events += parse_trace(fetch_upstream_file(store, path),
                              _where(path, UPSTREAM_COMMIT), trace_name(file_name), names)
    return events, {name: [trace_name(f) for f in files] for name, files in splits.items()}


def load_upstream_reward_test_set(store: ArtifactStore | Path) -> list[RewardTestRow]:
    return parse_reward_test_set(fetch_upstream_file(store, REWARD_TEST_PATH),
                                 _where(REWARD_TEST_PATH, UPSTREAM_COMMIT))


def extract_string(module_source: str, module: str, owner: str, key: str | None = None) -> str:
    """A string literal of a module, read with `ast` and never run: the value bound to the
    top-level name `owner` (key None), or the value of `key` in the one dict literal inside the
    top-level assignment or function `owner` (e.g. inside a `json.dumps({...})` call)."""
    try:
        tree = ast.parse(module_source)
    except SyntaxError as exc:
        raise UserError(f"{module} does not parse: {exc.msg}") from None
    found: ast.AST | None = None
    for node in tree.body:  # the last binding wins, as it would at run time
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == owner:
            found = node
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == owner for t in node.targets):
            found = node.value
    if found is None:
        raise UserError(f"{module} defines no {owner}")
    if key is None:
        value_node = found
    else:
        values = [value for node in ast.walk(found) if isinstance(node, ast.Dict)
                  for k, value in zip(node.keys, node.values)
                  if isinstance(k, ast.Constant) and k.value == key]
        if len(values) != 1:
            raise UserError(f"{module}: {owner} holds {len(values)} dict keys {key!r}, not one")
        value_node = values[0]
    try:
        value = ast.literal_eval(value_node)
    except (ValueError, TypeError, SyntaxError):
        value = None
    if not isinstance(value, str):
        what = owner if key is None else f"{owner}[{key!r}]"
        raise UserError(f"{module}: {what} is not a plain string")
    return value


class PromptText(BaseModel):
    """One prompt text and where it came from."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(description="The exact text sent.")
    sha256: str = Field(description="sha256 of the text's UTF-8 bytes.")
    source: str = Field(description="The upstream file and name it was read from, or a path.")


class Prompts(BaseModel):
    """The benchmark's four prompt texts."""

    model_config = ConfigDict(frozen=True)

    agent_system: PromptText = Field(description="System prompt of the model under test.")
    step_instruction: PromptText = Field(
        description="The instruction wrapped around the newest event's observation.")
    reward_system: PromptText = Field(description="System prompt of the judge (reward model).")
    reward_instruction: PromptText = Field(
        description="The instruction closing the judge's user message.")


def load_upstream_prompts(store: ArtifactStore | Path, hint: str | None = None) -> Prompts:
    """The four prompts of the pinned commit, each checked against its pinned sha256; `hint`
    says what to do instead when they cannot be downloaded."""
    modules: dict[str, str] = {}
    texts: dict[str, PromptText] = {}
    for name, (module, owner, key) in PROMPT_LOCATIONS.items():
        if module not in modules:
            modules[module] = fetch_upstream_file(store, module, hint=hint).decode("utf-8")
        text = extract_string(modules[module], module, owner, key)
        digest = text_sha256(text)
        source = _where(module, UPSTREAM_COMMIT) + f" {owner}" + (f"[{key!r}]" if key else "")
        if digest != PROMPT_SHA256[name]:
            raise UserError(f"{source} has sha256 {digest[:16]}..., expected "
                            f"{PROMPT_SHA256[name][:16]}...: refusing to use it")
        texts[name] = PromptText(text=text, sha256=digest, source=source)
    return Prompts(**texts)


def read_prompt_file(path: str | Path) -> PromptText:
    """A prompt of the user's (`--eval-system-prompt-file`, `--judge-prompt`, `--prompt`), used
    as is (see proactflow.suites.sources.read_prompt_file)."""
    found = sources.read_prompt_file(path)
    return PromptText(text=found.text, sha256=found.sha256, source=found.source)
