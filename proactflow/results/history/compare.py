"""A regression side by side: for two nights a finding compares, the viewer (viewer/site.py) of the
two nights' evaluations holding only the samples that changed verdict, where each sample shows
both nights' responses and verdicts next to each other.

One page per pair of nights, `<out>/compare/<n>/index.html` (a sweep's `<out>` is the night's
own folder, night_pages.py), shared by the findings of every group of that pair; each changed
sample links to its place in it, and each card says "before" or "after" with its night's date,
time and snapshot. Each night is read as it was: its judgments and responses at the versions it
read (cache/pinned.py), though a later `--refresh` or `refresh_on_change` wrote newer ones beside
them under the same key. Pages an earlier report left under `<out>/compare/` that this one does
not link are removed: a reader opening the folder finds only this report's pairs. A night whose
artifacts are gone (`gc --forget-history`) has no page: its findings keep their verdicts,
without the link.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

from ...cache.artifacts import ArtifactStore
from ...cache.pinned import PinnedStore
from ...suites import get_suite
from ...suites.base import Suite
from ..evaluations import evaluation_of
from .scores import Finding
from ..suite_evaluations import suite_evaluation
from ..viewer.site import write_viewer

FOLDER = "compare"


def _read_as(store: ArtifactStore, suite: Suite, key: str, version: int | None,
             responses: tuple[str, int] | None) -> ArtifactStore:
    """The store as a night read it: its judgments (and responses) at the versions it read,
    though a later refresh wrote newer ones beside them (None: not recorded, the newest)."""
    pins = {} if version is None else {(suite.stages.judgments, key): version}
    if responses is not None:
        pins[(suite.stages.responses, responses[0])] = responses[1]
    return PinnedStore(store, pins) if pins else store


def _write(store: ArtifactStore, suite: Suite, folder: Path, findings: list[Finding]
           ) -> Path | None:
    first = findings[0]
    only = {suite.history_view_sample(c["sample"]) for f in findings for c in f.changed}
    if not only or not all(first.evaluations):
        return None
    # Each card: before or after, its night's date and time, and the snapshot that answered.
    labels = (f"before · {first.before}", f"after · {first.after}")
    read = [_read_as(store, suite, key, version, responses) for key, version, responses
            in zip(first.evaluations, first.versions, first.responses_read)]
    try:
        if suite.evaluations_with_triggers:
            found = [evaluation_of(night, key) for night, key in zip(read, first.evaluations)]
            if any(e is None for e in found):
                return None
            return write_viewer([replace(e, label=f"{e.base_label} · {label}")
                                 for e, label in zip(found, labels) if e is not None],
                                folder, only=only)
        others = [suite_evaluation(suite, night, key)
                  for night, key in zip(read, first.evaluations)]
        return write_viewer([replace(e, label=f"{e.base_label} · {label}", store=night)
                             for e, label, night in zip(others, labels, read) if e is not None],
                            folder, store, only=only)
    except FileNotFoundError:  # an artifact, or the version of it, the night read is gone
        return None


def with_comparisons(store: ArtifactStore, out: Path, findings: list[Finding]
                     ) -> list[Finding]:
    """Write the side-by-side pages of `findings` under `out`; returns the findings with the
    page in `links["side_by_side"]` and each changed sample's place in it as its `view`."""
    groups: dict[tuple[object, ...], list[Finding]] = {}
    for finding in findings:
        groups.setdefault(_read_pair(finding), []).append(finding)
    pages: dict[tuple[object, ...], str | None] = {}
    kept: set[str] = set()
    for number, (pair, group) in enumerate(groups.items(), start=1):
        written = _write(store, get_suite(group[0].suite), out / FOLDER / str(number), group)
        pages[pair] = written.resolve().as_uri() if written is not None else None
        if written is not None:
            kept.add(str(number))
    _remove_unlinked(out / FOLDER, kept)
    linked = []
    for finding in findings:
        page = pages[_read_pair(finding)]
        if page is None:
            linked.append(finding)
            continue
        suite = get_suite(finding.suite)
        changed = [{**c, "view": page + "#t=" + quote(suite.history_view_sample(c["sample"]),
                                                      safe="/:@")} for c in finding.changed]
        linked.append(replace(finding, changed=changed,
                              links={**finding.links, "side_by_side": page}))
    return linked


def _read_pair(finding: Finding) -> tuple[object, ...]:
    """What the two nights of a finding read: one page per such pair (a refresh keeps the key
    and changes the version)."""
    return (finding.evaluations, finding.versions, finding.responses_read)


def _remove_unlinked(folder: Path, kept: set[str]) -> None:
    """Remove the numbered pages under `folder` that are not in `kept` (an earlier report's,
    with more pairs, or a pair whose night has no page now); anything else is left alone."""
    if not folder.is_dir():
        return
    for page in folder.iterdir():
        if page.is_dir() and page.name.isdigit() and page.name not in kept:
            shutil.rmtree(page)
