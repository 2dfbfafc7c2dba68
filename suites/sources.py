"""The edges to benchmark data: the corpus (hub or local file) and the upstream judge prompt.

Both are data, not code of this project: the corpus comes from the Hugging Face hub at a pinned
or recorded revision, and the judge prompt is read out of the upstream module with `ast` (never
executed) at a pinned commit, checked against its known hash and cached in the store.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pydantic import ValidationError

from ..cache.artifacts import ArtifactStore
from ..cache.keys import text_sha256
from ..common.errors import CorpusError, UserError
from ..common.network import unreachable
from .proactbench.corpus import CorpusRow
from ..config.settings import UPSTREAM_PROMPT_COMMIT, UPSTREAM_PROMPT_SHA256, CorpusSource

UPSTREAM_MODULE_URL_ENV = "PROACTFLOW_UPSTREAM_PROMPT_URL"
UPSTREAM_MODULE_URL = ("https://raw.githubusercontent.com/boson-ai/ProactBench/{commit}/"
                       "proactbench/prompts/runtime.py")
JUDGE_TEMPLATE_NAME = "JUDGE_SYSTEM_TEMPLATE"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class CorpusFile:
    """A corpus file located (downloaded if need be) but not yet parsed."""

    path: Path
    revision: str
    """Hub commit sha, or `sha256:<hex>` of a local file's bytes."""
    description: str

    def rows(self) -> list[CorpusRow]:
        return parse_corpus(self.path.read_bytes(), self.description)


def _field_path(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "(row)"


def _newline_chunks(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of each piece of `data` up to and with a newline (the last piece may
    have none): split as text, pieces give the lines the whole gives."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        yield start, data[start:end]
        start = end


def parse_corpus(data: bytes, source: str) -> list[CorpusRow]:
    """Validate every line of a corpus file; the first problem raises CorpusError.

    Read a line at a time: the whole file as text and as a list of lines (twice its size
    again, four times for text beyond Latin-1) held about 30 MB more at the peak of a run's
    start for ProactBench's 8.5 MB corpus. Lines are split as `str.splitlines` splits them, and
    an invalid UTF-8 byte anywhere is reported before any line is parsed, as when the file was
    decoded whole. (A newline byte never occurs inside a UTF-8 sequence, so each piece decodes
    alone exactly as within the whole.)"""
    for index, (offset, chunk) in enumerate(_newline_chunks(data)):
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusError(source, index + 1, f"not valid UTF-8 (byte {offset + exc.start})") \
                from None
    rows: list[CorpusRow] = []
    first_seen: dict[str, int] = {}
    lines = (text_line for _, chunk in _newline_chunks(data)
             for text_line in chunk.decode("utf-8").splitlines())
    for number, text_line in enumerate(lines, start=1):
        if not text_line.strip():
            continue
        try:
            raw = json.loads(text_line)
        except json.JSONDecodeError as exc:
            raise CorpusError(source, number, f"invalid JSON ({exc.msg} at column {exc.colno})") \
                from None
        if not isinstance(raw, dict):
            raise CorpusError(source, number, "expected a JSON object")
        try:
            row = CorpusRow.model_validate(raw)
        except ValidationError as exc:
            error = exc.errors()[0]
            raise CorpusError(source, number,
                              f"field {_field_path(error['loc'])}: {error['msg']}") from None
        if row.unique_id_eval in first_seen:
            raise CorpusError(source, number, f"duplicate unique_id_eval {row.unique_id_eval!r} "
                                              f"(first on line {first_seen[row.unique_id_eval]})")
        first_seen[row.unique_id_eval] = number
        rows.append(row)
    if not rows:
        raise CorpusError(source, None, "no dialogues (the file is empty)")
    return rows


def read_corpus_file(path: str | Path) -> tuple[list[CorpusRow], str]:
    """Rows of a local corpus file and its revision (sha256 of its bytes)."""
    located = locate_local_corpus(path)
    return located.rows(), located.revision


def locate_local_corpus(path: str | Path) -> CorpusFile:
    path = Path(path).expanduser()
    try:
        with path.open("rb") as corpus:  # in blocks: the file is read whole once, to parse
            digest = hashlib.file_digest(corpus, "sha256").hexdigest()
    except FileNotFoundError:
        raise UserError(f"corpus file not found: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read corpus file {path}: {exc.strerror}") from None
    return CorpusFile(path, "sha256:" + digest, str(path))


def download_corpus(repo_id: str, filename: str, revision: str | None) -> tuple[Path, str]:
    """Fetch the corpus file from the hub (or its local cache); return it and its commit sha."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (EntryNotFoundError, LocalEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    # Offline, the hub client retries for tens of seconds: look once, then use the local cache.
    offline = constants.HF_HUB_OFFLINE or unreachable(constants.ENDPOINT)
    try:
        path = Path(hf_hub_download(repo_id=repo_id, filename=filename, repo_type="dataset",
                                    revision=revision, local_files_only=bool(offline)))
    except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: test it first
        where = f"{filename} from {repo_id}{'@' + revision if revision else ''}"
        if offline:
            reason = "HF_HUB_OFFLINE is set" if offline is True else f"no network: {offline}"
            raise UserError(f"cannot download {where} ({reason}), and it is not in the local "
                            "hub cache: pass --corpus FILE") from None
        raise UserError(f"cannot download {where}: unreachable, and not in the local hub "
                        "cache (pass --corpus FILE)") from None
    except RevisionNotFoundError:
        raise UserError(f"hub dataset {repo_id} has no revision {revision!r}") from None
    except EntryNotFoundError:
        raise UserError(f"hub dataset {repo_id} has no file {filename!r}") from None
    except RepositoryNotFoundError:
        raise UserError(f"hub dataset {repo_id} not found (or it needs HF_TOKEN)") from None
    except OSError as exc:
        raise UserError(f"cannot download {filename} from {repo_id}: {exc}") from None
    # The hub cache keeps each file under snapshots/<commit sha>/: that is the revision used.
    commit = path.parent.name
    if not _COMMIT.match(commit):
        commit = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return path, commit


def locate_corpus(source: CorpusSource) -> CorpusFile:
    """The corpus file and its revision, without parsing it: a triggers artifact stored for that
    revision was built from these very bytes, so it needs no second validation."""
    if source.path:
        return locate_local_corpus(source.path)
    path, commit = download_corpus(source.repo_id, source.filename, source.revision)
    return CorpusFile(path, commit, f"{source.repo_id}/{source.filename}@{commit[:12]}")


@dataclass(frozen=True)
class Prompt:
    """A prompt text a suite sends, with its sha256 (which enters artifact keys) and where it
    came from (a pinned upstream file, or a file of the user's)."""

    text: str
    sha256: str
    source: str


def extract_string_constant(module_source: str, name: str = JUDGE_TEMPLATE_NAME) -> str:
    """The value of a module-level string constant, read with `ast` without running the code."""
    try:
        tree = ast.parse(module_source)
    except SyntaxError as exc:
        raise UserError(f"upstream prompt module does not parse: {exc.msg}") from None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
        value_node = getattr(node, "value", None)
        if value_node is not None and any(isinstance(t, ast.Name) and t.id == name
                                          for t in targets):
            try:
                value = ast.literal_eval(value_node)
            except ValueError:
                raise UserError(f"{name} in the upstream module is not a plain string") from None
            if isinstance(value, str):
                return value
    raise UserError(f"the upstream prompt module defines no string {name}")


def read_prompt_file(path: str | Path, label: str = "prompt") -> Prompt:
    """A prompt of the user's, used as is: no newline is stripped, since the text is sent byte
    for byte. Every way it cannot be read is one line."""
    path = Path(path).expanduser()
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise UserError(f"{label} file not found: {path}") from None
    except UnicodeDecodeError:
        raise UserError(f"{label} file is not UTF-8: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {label} file {path}: {exc.strerror}") from None
    if not text.strip():
        raise UserError(f"{label} file is empty: {path}")
    return Prompt(text, text_sha256(text), str(path))


def read_judge_prompt_file(path: str | Path) -> Prompt:
    return read_prompt_file(path, "judge prompt")


def fetch_upstream_judge_prompt(store: ArtifactStore | Path | str,
                                commit: str = UPSTREAM_PROMPT_COMMIT,
                                expected_sha256: str = UPSTREAM_PROMPT_SHA256) -> Prompt:
    """The upstream judge prompt at a pinned commit: from the store (`inputs/judge_prompt/`),
    or downloaded once. A store may be given as its root (the form callers used before)."""
    if not isinstance(store, ArtifactStore):
        store = ArtifactStore(store)
    cached_name = f"judge_prompt/{commit}.txt"
    source = f"boson-ai/ProactBench@{commit[:12]}:{JUDGE_TEMPLATE_NAME}"
    cached = store.read_input(cached_name)
    if cached is not None:
        text = cached.decode("utf-8", errors="replace")
        if text_sha256(text) == expected_sha256:
            return Prompt(text, expected_sha256, source)
    url = os.environ.get(UPSTREAM_MODULE_URL_ENV, UPSTREAM_MODULE_URL).format(commit=commit)
    offline = unreachable(url)
    if offline:
        raise UserError(f"cannot download the upstream judge prompt (no network: {offline}); "
                        "pass --judge-prompt FILE, or run once with a network to cache it") \
            from None
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            module_source = response.read().decode("utf-8")
    except (urllib.error.URLError, OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(f"cannot download the upstream judge prompt from {url} ({reason}); "
                        "pass --judge-prompt FILE") from None
    text = extract_string_constant(module_source)
    digest = text_sha256(text)
    if digest != expected_sha256:
        raise UserError(f"upstream judge prompt at {commit[:12]} has sha256 {digest[:16]}..., "
                        f"expected {expected_sha256[:16]}...: refusing to use it")
    store.write_input(cached_name, text.encode("utf-8"))
    return Prompt(text, digest, source)
