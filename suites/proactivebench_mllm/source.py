"""Where the multimodal ProactiveBench's corpus comes from: a folder in the package's layout
(--corpus DIR), or the test archives of the chosen datasets on the Hugging Face hub at a pinned
revision, downloaded with huggingface_hub and extracted once into the store's local cache."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path

from ...common.errors import UserError
from ...common.network import unreachable
from .datasets import DATASETS, Dataset

HUB_REPO = "tdemin16/ProactiveBench"
HUB_REVISION = "main"
"""The hub revision read when --revision is not given; the commit it resolves to is what
enters the samples' key and names the extracted folder."""
_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".zip")


def folder_revision(folder: Path, datasets: tuple[Dataset, ...]) -> str:
    """sha256 over every dataset entry file the folder holds, and the path and size of every
    other file of the folder: the images are not read (tens of GB), but one replaced by another
    of a different size gives the corpus a new revision, so stored results are not reused for it
    (the same path and size after a change in place is not seen: give such a corpus a new
    folder). Paths are relative: the same corpus moved keeps its revision. The revision is the
    folder's whatever `datasets` chooses (the selection is a key setting of its own); each chosen
    dataset's entry file must be there."""
    for data in datasets:
        if not (folder / data.file_name).is_file():
            raise UserError(f"{folder / data.file_name} does not exist: --corpus is a folder "
                            f"holding {data.file_name} and its images (the package's layout)")
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix != ".jsonl":
            relative = path.relative_to(folder).as_posix()
            digest.update(f"{relative}\0{path.stat().st_size}\0".encode())
    for data in DATASETS:
        path = folder / data.file_name
        if not path.is_file():
            continue
        try:
            digest.update(data.file_name.encode() + b"\0" + path.read_bytes() + b"\0")
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    return "sha256:" + digest.hexdigest()


def _hub_files(revision: str) -> tuple[str, list[str]]:
    from huggingface_hub import HfApi
    from huggingface_hub.utils import HfHubHTTPError

    problem = unreachable("https://huggingface.co")
    if problem or os.environ.get("HF_HUB_OFFLINE"):
        why = problem or "HF_HUB_OFFLINE is set"
        raise UserError(f"cannot reach the hub for {HUB_REPO} ({why}): give --corpus DIR (a "
                        "folder in the package's layout)")
    try:
        info = HfApi().dataset_info(HUB_REPO, revision=revision)
    except HfHubHTTPError as exc:
        raise UserError(f"cannot read {HUB_REPO}@{revision} on the hub ({exc}); give --corpus "
                        "DIR instead") from None
    return str(info.sha), [s.rfilename for s in info.siblings or ()]


def _belongs(name: str, data: Dataset) -> bool:
    lowered = name.lower()
    return data.full.lower() in lowered or Path(name).name.lower().startswith(
        data.short.lower())


def hub_corpus(cache: Path, datasets: tuple[Dataset, ...], revision: str | None
               ) -> tuple[Path, str]:
    """The folder holding the chosen datasets, extracted from the hub's files at the commit
    `revision` resolves to (its entry files and archives only; each dataset extracted once,
    atomically: a killed extraction leaves nothing behind)."""
    commit, files = _hub_files(revision or HUB_REVISION)
    root = cache / "proactivebench-mllm" / commit
    for data in datasets:
        done = root / ".extracted" / data.short
        if done.exists():
            continue
        chosen = [f for f in files if _belongs(f, data)
                  and (f.endswith(_ARCHIVES) or f.endswith(".jsonl"))]
        if not chosen:
            raise UserError(f"{HUB_REPO}@{commit[:12]} holds no files for {data.full}; give "
                            "--corpus DIR instead")
        _extract(root, commit, chosen)
        done.parent.mkdir(parents=True, exist_ok=True)
        done.write_text(json.dumps(chosen), encoding="utf-8")
    return root, f"{HUB_REPO}@{commit}"


def _extract(root: Path, commit: str, names: list[str]) -> None:
    from huggingface_hub import hf_hub_download

    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".extracting-", dir=root))
    try:
        for name in names:
            path = Path(hf_hub_download(HUB_REPO, name, repo_type="dataset", revision=commit))
            try:
                if name.endswith(".zip"):
                    with zipfile.ZipFile(path) as archive:
                        archive.extractall(staging)
                elif name.endswith(_ARCHIVES):
                    with tarfile.open(path) as archive:
                        archive.extractall(staging, filter="data")
                else:
                    shutil.copyfile(path, staging / Path(name).name)
            except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
                raise UserError(f"cannot extract {name} of {HUB_REPO}@{commit[:12]} ({exc}); "
                                "give --corpus DIR instead") from None
        for entry in staging.iterdir():
            _move_into(entry, root / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _move_into(entry: Path, target: Path) -> None:
    """`entry` renamed to `target`; a folder already there (another dataset's archive may share
    its top folder) gains entry's contents instead of being replaced."""
    if entry.is_dir() and target.is_dir():
        for child in entry.iterdir():
            _move_into(child, target / child.name)
        entry.rmdir()
        return
    if target.exists():
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    entry.rename(target)
