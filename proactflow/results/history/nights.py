"""The sweeps' history: each sweep (a night) is one point of its series, kept in the store.

A night is one JSON file, `history/<series>/<night>-<id>.json`, written through the store's own
edge (a folder or S3), so any host that reads the store reads the series. It is
self-contained: for each (model, judge) evaluated that night, the artifact keys, the snapshot
that answered (served model and system fingerprint of the responses, and of the judge), the
verdict of every sample with the components of its suite's history metric
(Suite.history_samples), each group's figure and interval as computed that night, and the
versions of the judgments and responses read, and the night before it (`previous`: a night
deleted since is a gap, with_gaps). The history's scores, intervals and regressions come
from those verdicts (scores.py), so they stay readable after `gc` removed the
artifacts; `gc` keeps the artifacts a night names, at the versions it read, anyway (its
side-by-side pages read them) unless told not to. Its pages (report, viewer) are kept in `out`
(night_pages.py).

"Now" is `PROACTFLOW_NOW` (an ISO time) when set: nightly sweeps can be replayed on a fake
clock.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Collection, Iterable, Iterator

import polars as pl

from ...cache.artifacts import ArtifactStore
from ...common.errors import UserError
from ...suites import get_suite
from ...suites.base import Suite

NOW_ENV = "PROACTFLOW_NOW"
log = logging.getLogger("proactflow.history")
FOLDER = "history"


def now() -> datetime:
    """The current time, or `PROACTFLOW_NOW` when set (a replay's fake clock)."""
    text = os.environ.get(NOW_ENV)
    if not text:
        return datetime.now(timezone.utc)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"{NOW_ENV}={text!r}: not an ISO time (e.g. 2026-11-26T02:00:00Z)") \
            from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def series_slug(name: str) -> str:
    """A series name as a folder name and a Prefect artifact key (lowercase, digits, dashes)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "sweep"


@dataclass(frozen=True)
class Night:
    """One point of a series: a sweep (or a labelled run) as it was recorded."""

    series: str
    suite: str
    night: datetime
    content: dict[str, Any]
    location: str
    set_aside: str | None = None
    """Why this night's file is not used (checks.py), or None: a set-aside night has
    no pairs; the history shows it as a gap."""
    gone: bool = False
    """A night whose file was deleted (nights.with_gaps): a gap, `set_aside` saying so."""

    @property
    def pairs(self) -> list[dict[str, Any]]:
        return [] if self.set_aside else list(self.content.get("pairs") or [])

    @property
    def date(self) -> str:
        return self.night.strftime("%Y-%m-%d %H:%M")


def snapshot_of(frame: pl.DataFrame) -> dict[str, str | None]:
    """The (served model, system fingerprint) that answered most of a stage table's rows."""
    if "served_model" not in frame.columns or frame.is_empty():
        return {"served_model": None, "system_fingerprint": None}
    fingerprint = frame["system_fingerprint"] if "system_fingerprint" in frame.columns \
        else pl.Series([None] * frame.height)
    counted = Counter((m, f) for m, f in zip(frame["served_model"].to_list(),
                                             fingerprint.to_list()) if m is not None)
    if not counted:
        return {"served_model": None, "system_fingerprint": None}
    (model, fingerprint_value), _ = counted.most_common(1)[0]
    return {"served_model": model, "system_fingerprint": fingerprint_value}


def pair_entry(suite: Suite, model: str, judge: str, revision: str | None,
               judgments_key: str, responses_key: str, responses: pl.DataFrame,
               judgments: pl.DataFrame, notes: list[str] | None = None) -> dict[str, Any]:
    """What a night keeps of one (model, judge) evaluation: with every sample's verdict and its
    metric's components when the suite declares a history metric."""
    samples = suite.history_samples(judgments) if suite.history_metric is not None else None
    return {"model": model, "judge": judge, "revision": revision,
            "variant": suite.variant_name(judgments),
            "judgments": judgments_key, "responses": responses_key,
            "snapshot": snapshot_of(responses.filter(pl.col("status") == "ok")
                                    if "status" in responses.columns else responses),
            "judge_snapshot": snapshot_of(judgments), "notes": notes or [],
            "metric": suite.history_metric.name if suite.history_metric else None,
            "samples": samples_record(samples) if samples is not None else None}


def samples_record(samples: pl.DataFrame) -> dict[str, list[Any]]:
    """A night's samples as its file keeps them: a list per column; `unit` left out where
    every sample is its own unit (the multimodal and video suites' samples)."""
    record = samples.to_dict(as_series=False)
    if samples["unit"].equals(samples["sample"]):
        del record["unit"]
    return record


def night_name(night: datetime, run_id: str) -> str:
    """A night's name: its file's (`<name>.json`) and its pages' folder (night_pages.py)."""
    return f"{night.astimezone(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{run_id[:8]}"


def write_night(store: ArtifactStore, series: str, suite: str, night: datetime, run_id: str,
                pairs: list[dict[str, Any]], links: dict[str, str | None],
                extra: dict[str, Any] | None = None) -> str:
    """Record a night of `series`; returns where it is. The night names the file of the night
    before it in the series (`previous`), so that a night deleted since shows as a gap."""
    folder = f"{FOLDER}/{series_slug(series)}"
    name = f"{folder}/{night_name(night, run_id)}.json"
    previous = max((other for other in store.json_names(folder) if other < name), default=None)
    return store.write_json(name, {"series": series, "suite": suite,
                                   "night": night.isoformat(), "run_id": run_id,
                                   "previous": previous.rsplit("/", 1)[-1] if previous else None,
                                   **links, **(extra or {}), "pairs": pairs}, compact=True)


def read_nights(store: ArtifactStore, *, series: str | None = None, suite: str | None = None,
                since: datetime | None = None) -> list[Night]:
    """The recorded nights, oldest first, narrowed by series, suite and start time."""
    folder = f"{FOLDER}/{series_slug(series)}" if series else FOLDER
    nights = list(_nights(store, folder, suite))
    nights.sort(key=lambda n: (n.night, n.location))
    nights = with_gaps(nights, store.json_names(folder), store.location)
    return [night for night in nights if not since or night.night >= since]


GONE = "its file was deleted (the night after names it as the one before)"


def with_gaps(nights: list[Night], present: Collection[str],
              location_of: Callable[[str], str] = str) -> list[Night]:
    """`nights` (oldest first) with a gone night where a night's `previous` file (the night
    before it, write_night) is not among `present` (the names of the series' files); a gone
    night is a gap like a set-aside one (checks.py), its file missing rather than
    unusable. `location_of` says where a name is."""
    known = set(present)
    gone: dict[str, Night] = {}
    for night in nights:
        previous = night.content.get("previous")
        folder = f"{FOLDER}/{series_slug(night.series)}"
        stamp = _STAMP.search(previous) if isinstance(previous, str) else None
        if stamp is None or "/" in str(previous) or f"{folder}/{previous}" in known:
            continue
        moment = datetime.strptime(stamp.group(1), "%Y%m%dT%H%M%SZ").replace(
            tzinfo=timezone.utc)
        gone.setdefault(str(previous), Night(night.series, night.suite, moment, {},
                                        location_of(f"{folder}/{previous}"), GONE, gone=True))
    if not gone:
        return nights
    return sorted([*nights, *gone.values()], key=lambda n: (n.night, n.location))


def newest_nights(store: ArtifactStore, *, series: str, suite: str | None = None
                  ) -> Iterator[Night]:
    """The nights of `series` (of `suite`), newest first, each read only when the caller
    reaches it: a sweep needs the latest few of a series that may hold years of nights, each
    with every sample's verdict. A night's file is named by its time, so names sort as nights
    do."""
    return _nights(store, f"{FOLDER}/{series_slug(series)}", suite, last_first=True)


def _nights(store: ArtifactStore, folder: str, suite: str | None, *, last_first: bool = False
            ) -> Iterator[Night]:
    for entry, data in store.json_files(folder, last_first=last_first):
        night = _night(store.location(entry.name), entry.name, data)
        if not suite or night.suite == suite or (night.set_aside and not night.suite):
            yield night


_STAMP = re.compile(r"(\d{8}T\d{6}Z)-[^/]*\.json$")
_said: set[str] = set()
"""The set-aside nights already named in this process (each is read several times a sweep)."""


def _night(location: str, name: str, data: bytes) -> Night:
    """A night file read against its schema; one that cannot be used is set aside, said once."""
    from .checks import night_problem

    content: Any = None
    try:
        content = json.loads(data.decode("utf-8"))
        moment = datetime.fromisoformat(str(content["night"]))
        problem = night_problem(content)
    except (ValueError, KeyError, TypeError) as exc:
        problem = f"not a readable night ({str(exc).splitlines()[0][:120]})"
    if problem is None:
        moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
        return Night(str(content.get("series", "")), str(content.get("suite", "")), moment,
                     content, location)
    stamp = _STAMP.search(name)
    moment = datetime.strptime(stamp.group(1), "%Y%m%dT%H%M%SZ").replace(
        tzinfo=timezone.utc) if stamp else datetime.fromtimestamp(0, timezone.utc)
    known = content if isinstance(content, dict) else {}
    series = str(known.get("series") or name.split("/")[-2])
    if location not in _said:
        _said.add(location)
        log.warning("history: %s set aside (%s): nights are compared with the newest readable "
                    "one", location, problem)
    return Night(series, str(known.get("suite") or ""), moment, {}, location, problem)


def needed_keys(store: ArtifactStore) -> set[tuple[str | None, str]]:
    """(stage, key) of every artifact a recorded night names, each in its suite's own stage
    folders (`Suite.stages`): what `gc` keeps for the history. A night of a suite this process
    cannot load (a plugin since uninstalled) names its keys with stage None: kept in whatever
    folder holds them (a key is a content hash, so it names one artifact)."""
    return set(needed_versions(store))


def needed_versions(store: ArtifactStore) -> dict[tuple[str | None, str], set[int]]:
    """`needed_keys`, each with the versions of it the nights read (`judgments_version`,
    `responses_version`; none recorded: an empty set): a refresh wrote newer ones beside them,
    and the night's side-by-side pages read these (cache/pinned.py), so `gc` keeps them."""
    folders: dict[str, tuple[str, str] | None] = {}
    needed: dict[tuple[str | None, str], set[int]] = {}
    for night in read_nights(store):
        if night.suite not in folders:
            folders[night.suite] = _stage_folders(night.suite)
        stages = folders[night.suite]
        for pair in night.pairs:
            for index, field in enumerate(("judgments", "responses")):
                if pair.get(field):
                    versions = needed.setdefault(
                        (stages[index] if stages else None, str(pair[field])), set())
                    if isinstance(pair.get(f"{field}_version"), int):
                        versions.add(pair[f"{field}_version"])
    return needed


def pins_of(suite: str, pair: dict[str, Any]) -> dict[tuple[str, str], int]:
    """(stage, key) -> the version a night's pair read, for a PinnedStore (cache/pinned.py)."""
    stages = _stage_folders(suite)
    if stages is None:
        return {}
    return {(stage, str(pair[field])): pair[f"{field}_version"]
            for stage, field in zip(stages, ("judgments", "responses"))
            if pair.get(field) and isinstance(pair.get(f"{field}_version"), int)}


def _stage_folders(suite_name: str) -> tuple[str, str] | None:
    """The (judgments, responses) folders of a night's suite; None when it cannot be loaded."""
    try:
        stages = get_suite(suite_name).stages
    except (UserError, ImportError, AttributeError):
        return None
    return stages.judgments, stages.responses


def latest_snapshots(newest_first: Iterable[Night], wanted: Collection[tuple[str, str]] = ()
                     ) -> dict[tuple[str, str], tuple[dict[str, Any], str]]:
    """(role, model) -> the snapshot that answered it on the latest night that evaluated it,
    and that night's date; role is `model` or `judge`. The nights come newest first; reading
    stops once every (role, model) in `wanted` is found."""
    found: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
    for night in newest_first:
        for pair in reversed(night.pairs):  # the night's last word on a model, as it was kept
            for role, field, name in (("model", "snapshot", pair["model"]),
                                      ("judge", "judge_snapshot", pair["judge"])):
                if (role, name) not in found and (pair.get(field) or {}).get("served_model"):
                    found[(role, name)] = (pair[field], night.date)
        if wanted and all(key in found for key in wanted):
            break
    return found
