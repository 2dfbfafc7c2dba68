"""Each night's own pages: what a sweep (or a labelled run) wrote into its `out` folder, kept
where the next night does not write.

A sweep writes its report and viewer into `out` every night (`out/report.html`,
`out/viewer/index.html`, `out/sweep.md`, `out/compare/<n>/`): that stays the entry point, the
latest night. The night keeps its own copy under `out/nights/<night>/` (`<night>` as its file in
the history is named: `<time>-<run id>`), and the history (the night's file, history.csv,
history.html) and every finding link that copy: a link to an earlier night opens what that night
showed, not the latest.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ...cache.artifacts import write_atomic

FOLDER = "nights"
COMPARE = "compare"


def night_folder(out: Path, name: str) -> Path:
    """Where the night `name` (nights.night_name) keeps its pages under `out`."""
    return out / FOLDER / name


def _link_or_copy(source: str, target: str) -> None:
    """A hard link where the file system allows one: every writer of these pages replaces a
    file (write_atomic, a new file renamed over the old), never writes into it, so the night's
    link keeps the bytes it had. A copy otherwise."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def keep_pages(out: Path, name: str, pages: list[str]) -> dict[str, Path]:
    """Copy `pages` of `out` (files, or folders such as `viewer`) that exist into the night's
    folder, replacing an earlier copy; returns page -> where the night keeps it."""
    folder = night_folder(out, name)
    kept = {}
    for page in pages:
        source, target = out / page, folder / page
        if not source.exists():
            continue
        if target.is_dir():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, copy_function=_link_or_copy)
        else:
            write_atomic(target, source.read_bytes())
        kept[page] = target
    return kept


def mirror_compare(out: Path, name: str) -> None:
    """`out/compare/` as the latest night's (`compare/<n>/` stays the latest's address): its
    numbered pages replaced by those of the night's folder."""
    latest, own = out / COMPARE, night_folder(out, name) / COMPARE
    if latest.is_dir():
        for page in latest.iterdir():
            if page.is_dir() and page.name.isdigit():
                shutil.rmtree(page)
    if own.is_dir():
        latest.mkdir(parents=True, exist_ok=True)
        for page in own.iterdir():
            if page.is_dir() and page.name.isdigit():
                shutil.copytree(page, latest / page.name, copy_function=_link_or_copy)
