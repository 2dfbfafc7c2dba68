"""A regression side by side: for two nights a finding compares, the viewer (viewer.py) of the
two nights' evaluations holding only the samples that changed verdict, where each sample shows
both nights' responses and verdicts next to each other.

One page per pair of nights, `<out>/compare/<n>/index.html`, shared by the findings of every
group of that pair; each changed sample links to its place in it. Pages an earlier report left
under `<out>/compare/` that this one does not link are removed: a reader opening the folder
finds only this report's pairs. A night whose artifacts are
gone (`gc --forget-history`), or whose judgments a later `--refresh` replaced by another version
(the store serves the newest), has no page: its findings keep their verdicts, without the link.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

from ..cache.artifacts import ArtifactStore
from ..suites import get_suite
from ..suites.base import Suite
from .evaluations import evaluation_of
from .history_scores import Finding
from .suite_evaluations import suite_evaluation
from .viewer import write_viewer

FOLDER = "compare"


def _write(store: ArtifactStore, suite: Suite, folder: Path, findings: list[Finding]
           ) -> Path | None:
    first = findings[0]
    only = {suite.history_view_sample(c["sample"]) for f in findings for c in f.changed}
    if not only or not all(first.evaluations):
        return None
    labels = (first.before, first.after)
    try:
        if any(version is not None
               and store.get_by_key(suite.stages.judgments, key).version != version
               for key, version in zip(first.evaluations, first.versions)):
            return None  # not what that night read: a page would show another night's
        if suite.evaluations_with_triggers:
            found = [evaluation_of(store, key) for key in first.evaluations]
            if any(e is None for e in found):
                return None
            return write_viewer([replace(e, label=f"{e.base_label} · {label}")
                                 for e, label in zip(found, labels) if e is not None],
                                folder, only=only)
        others = [suite_evaluation(suite, store, key) for key in first.evaluations]
        return write_viewer([], folder, [replace(e, label=f"{e.base_label} · {label}")
                                         for e, label in zip(others, labels) if e is not None],
                            store, only=only)
    except FileNotFoundError:  # an artifact the night names is gone
        return None


def with_comparisons(store: ArtifactStore, out: Path, findings: list[Finding]
                     ) -> list[Finding]:
    """Write the side-by-side pages of `findings` under `out`; returns the findings with the
    page in `links["side_by_side"]` and each changed sample's place in it as its `view`."""
    groups: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault(finding.evaluations, []).append(finding)
    pages: dict[tuple[str, str], str | None] = {}
    kept: set[str] = set()
    for number, (pair, group) in enumerate(groups.items(), start=1):
        written = _write(store, get_suite(group[0].suite), out / FOLDER / str(number), group)
        pages[pair] = written.resolve().as_uri() if written is not None else None
        if written is not None:
            kept.add(str(number))
    _remove_unlinked(out / FOLDER, kept)
    linked = []
    for finding in findings:
        page = pages[finding.evaluations]
        if page is None:
            linked.append(finding)
            continue
        suite = get_suite(finding.suite)
        changed = [{**c, "view": page + "#t=" + quote(suite.history_view_sample(c["sample"]),
                                                      safe="/:@")} for c in finding.changed]
        linked.append(replace(finding, changed=changed,
                              links={**finding.links, "side_by_side": page}))
    return linked


def _remove_unlinked(folder: Path, kept: set[str]) -> None:
    """Remove the numbered pages under `folder` that are not in `kept` (an earlier report's,
    with more pairs, or a pair whose night has no page now); anything else is left alone."""
    if not folder.is_dir():
        return
    for page in folder.iterdir():
        if page.is_dir() and page.name.isdigit() and page.name not in kept:
            shutil.rmtree(page)
