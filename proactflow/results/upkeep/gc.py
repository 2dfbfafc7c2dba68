"""`proactflow gc`: remove old run records and the artifacts no kept run needs.

What stays:
- the run records among the newest `keep_latest` of their series (one model under test judged
  by one judge), and those started less than `older_than` ago;
- every artifact a kept record names, and every artifact those were computed from (followed
  through the input keys stored in each Parquet file);
- every artifact written or reused within the grace period, so that a run still going (its
  record is written at its end) keeps what it has made or is reading;
- every artifact a night of the sweeps' history names (`history/`), unless told to forget
  them (`keep_history=False`): the history itself is never removed, and its scores need no
  artifact, but its side-by-side pages do.

Of a kept artifact, the versions a newer one replaced (an incomplete output since completed, a
version a --refresh asked again) go once that newer one is past the grace period too, but for
the version a night of the history read (its side-by-side pages show what it read).

A run may reuse an artifact between the plan and the removal: each one is looked at again
right before its files go, and one used meanwhile is kept (a run that still finds it gone,
reusing it in the instant between that look and the removal, computes it again: pipeline.py).

Records go first, artifacts after: a crash in between leaves unreferenced artifacts for the next
gc, never a record naming an artifact that is gone. The per-call cache (`<store>/calls`) is not
touched: it is what makes a re-run free, and it holds no run's results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import PurePosixPath

from ...cache.artifacts import ArtifactStore, StoredKey
from ...cache.storage import Entry
from ...common.errors import UserError
from ...run.run_records import RunRecord, read_records
from ..history.nights import needed_versions

GRACE = timedelta(hours=24)

_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> timedelta:
    """`90m`, `12h`, `30d`, `2w` -> a timedelta; anything else is a one-line error."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mhdw])\s*", text)
    if not match:
        raise ValueError(f"expected an age such as 90m, 12h, 30d or 2w, got {text!r}")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


@dataclass
class Collection:
    """What one gc removes (or, with --dry-run, would remove)."""

    removed_runs: list[RunRecord] = field(default_factory=list)
    kept_runs: list[RunRecord] = field(default_factory=list)
    removed_artifacts: list[PurePosixPath] = field(default_factory=list)
    """Each by the name of its first version: `artifacts/<stage>/<key>.parquet`."""
    kept_artifacts: int = 0
    leftovers: list[PurePosixPath] = field(default_factory=list)
    freed_bytes: int = 0
    """Measured when planned: after the removal the files are gone."""
    files: list[Entry] = field(default_factory=list)
    """Every file to remove (all versions of a removed artifact, replaced versions of a kept
    one, leftovers)."""
    superseded: int = 0
    """Replaced versions of kept artifacts among `files`."""
    unneeded: list[StoredKey] = field(default_factory=list)
    """The artifacts to remove, as listed when planned (their files are among `files`)."""
    recent_cut: float = 0.0
    """An artifact written or reused at or after this time (seconds since the epoch) stays."""
    reused_meanwhile: int = 0
    """Artifacts planned for removal that a run reused before gc reached them: kept."""


def _runs_to_remove(records: list[RunRecord], keep_latest: int | None,
                    older_than: timedelta | None, now: datetime) -> list[RunRecord]:
    newest: dict[tuple[str, str, str], list[RunRecord]] = {}
    for record in sorted(records, key=lambda r: (r.started, r.name), reverse=True):
        newest.setdefault(record.series, []).append(record)
    removed = []
    for record in records:
        beyond_latest = keep_latest is None or \
            newest[record.series].index(record) >= keep_latest
        old_enough = older_than is None or record.started < now - older_than
        if beyond_latest and old_enough:
            removed.append(record)
    return removed


def _named_by_history(store: ArtifactStore, by_key: dict[tuple[str, str], StoredKey]
                      ) -> dict[tuple[str, str], set[int]]:
    """The stored artifacts the history's nights name, in their suites' own stage folders (a
    night of a suite that cannot be loaded: its keys in any folder), each with the versions
    the nights read (kept though a refresh replaced them: the nights' pages show them)."""
    named = needed_versions(store)
    anywhere: dict[str, set[int]] = {}
    for (stage, key), versions in named.items():
        if stage is None:
            anywhere.setdefault(key, set()).update(versions)
    return {name: named.get(name, set()) | anywhere.get(name[1], set())
            for name in sorted(by_key) if name in named or name[1] in anywhere}


def _inputs_of(store: ArtifactStore, found: StoredKey) -> dict[str, str]:
    try:
        current = store.current(found)
        return dict(current.material().get("inputs") or {}) if current else {}
    except (FileNotFoundError, ValueError):
        # Removed meanwhile, or not Parquet: nothing to follow (it is kept or removed as is).
        # Anything else (a store out of reach) stops gc before it removes anything.
        return {}


def _superseded(store: ArtifactStore, found: StoredKey, recent_cut: float,
                read: set[int] | None = None) -> list[Entry]:
    """The files of a kept artifact that a newer version replaced more than the grace period
    ago (a run that started before may still be reading them until then), but for the versions
    in `read` (those a night of the history read)."""
    current = store.current(found)
    if current is None:
        return []
    newest = next(e for e in found.files if e.name == current.name)
    if newest.modified >= recent_cut:
        return []
    kept = {current.name} | {found.versions[n].name for n in read or () if n in found.versions} \
        | ({found.incomplete.name} if read and 0 in read and found.incomplete else set())
    return [e for e in found.files if e.name not in kept and e is not found.marker]


def plan_collection(store: ArtifactStore, *, keep_latest: int | None,
                    older_than: timedelta | None, now: datetime | None = None,
                    keep_history: bool = True) -> Collection:
    """Decide what gc removes; reads the store, changes nothing."""
    if keep_latest is None and older_than is None:
        raise UserError("gc needs --keep-latest N, --older-than AGE or both "
                        "(see 'proactflow gc --help')")
    now = now or datetime.now(timezone.utc)
    records = read_records(store)
    removed_runs = _runs_to_remove(records, keep_latest, older_than, now)
    kept_runs = [r for r in records if r not in removed_runs]

    stored, temporary = store.inventory()
    by_key = {(found.stage, found.key): found for found in stored
              if found.versions or found.incomplete}
    recent_cut = (now - GRACE).timestamp()
    pending = [(stage, key) for record in kept_runs for stage, key in record.artifacts.items()]
    pending += [name for name, found in by_key.items() if found.modified >= recent_cut]
    read_by_nights = _named_by_history(store, by_key) if keep_history else {}
    pending += list(read_by_nights)
    needed: set[tuple[str, str]] = set()
    while pending:  # follow inputs: a kept judgments artifact keeps its responses and triggers
        name = pending.pop()
        found = by_key.get(name)
        if found is None or name in needed:
            continue
        needed.add(name)
        pending.extend(_inputs_of(store, found).items())
    removable = [found for found in stored if (found.stage, found.key) not in needed]
    superseded = [entry for name in sorted(needed)
                  for entry in _superseded(store, by_key[name], recent_cut,
                                           read_by_nights.get(name, set()))]
    leftovers = [e for e in temporary if e.modified < recent_cut]  # a write killed half-way
    files = [e for found in removable for e in found.files] + superseded + leftovers
    return Collection(
        removed_runs, kept_runs,
        [PurePosixPath(f"artifacts/{f.stage}/{f.key}.parquet") for f in removable
         if f.versions or f.incomplete],
        len(needed), [PurePosixPath(e.name) for e in leftovers],
        sum(e.size for e in files), files, len(superseded),
        [f for f in removable if f.versions or f.incomplete], recent_cut)


def _used_since(store: ArtifactStore, planned: StoredKey, cut: float) -> bool:
    now = store.stored_key(planned.stage, planned.key)
    return bool(now.files) and now.modified >= cut


def collect(store: ArtifactStore, collection: Collection) -> None:
    """Remove what `plan_collection` chose: records first, then artifacts, each looked at again
    just before its files go (one a run reused since the plan stays, and `collection` then
    says so)."""
    for record in collection.removed_runs:
        store.remove_record(record.name)
    of_keys = {entry.name for found in collection.unneeded for entry in found.files}
    for found in collection.unneeded:
        if _used_since(store, found, collection.recent_cut):
            _spare(collection, found)
        else:
            store.remove(found.files)
    store.remove([entry for entry in collection.files if entry.name not in of_keys])


def _spare(collection: Collection, found: StoredKey) -> None:
    names = {entry.name for entry in found.files}
    collection.files = [entry for entry in collection.files if entry.name not in names]
    collection.freed_bytes -= sum(entry.size for entry in found.files)
    collection.removed_artifacts.remove(
        PurePosixPath(f"artifacts/{found.stage}/{found.key}.parquet"))
    collection.kept_artifacts += 1
    collection.reused_meanwhile += 1


def _size(count: int) -> str:
    return f"{count / 1e6:.1f} MB" if count >= 1e6 else f"{count / 1e3:.0f} kB"


def summary_lines(collection: Collection, dry_run: bool) -> list[str]:
    verb = "would remove" if dry_run else "removed"
    lines = [f"{verb} run {r.name} ({r.flow}, {r.model} judged by {r.judge}, started "
             f"{r.started:%Y-%m-%d %H:%M} UTC)" for r in collection.removed_runs]
    by_stage: dict[str, int] = {}
    for path in collection.removed_artifacts:
        by_stage[path.parent.name] = by_stage.get(path.parent.name, 0) + 1
    stages = ", ".join(f"{count} {stage}" for stage, count in sorted(by_stage.items()))
    lines.append(f"{verb} {len(collection.removed_runs)} run records and "
                 f"{len(collection.removed_artifacts)} artifacts"
                 + (f" ({stages})" if stages else "")
                 + (f", {collection.superseded} replaced versions"
                    if collection.superseded else "")
                 + (f" and {len(collection.leftovers)} unfinished writes"
                    if collection.leftovers else "")
                 + (f" ({collection.reused_meanwhile} planned artifacts kept: a run reused "
                    "them meanwhile)" if collection.reused_meanwhile else "")
                 + f", {_size(collection.freed_bytes)}; kept "
                 f"{len(collection.kept_runs)} runs and {collection.kept_artifacts} artifacts")
    return lines

