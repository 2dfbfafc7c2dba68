"""Nights that are gone: a night file deleted since the night after it was recorded.

Each night names the file of the night before it in its series (`previous`, written by
history.write_night). A night whose `previous` is no longer in the series' folder shows where
it was as a gap (a `Night` marked `gone`, with no pairs), so that `proactflow history` says so
on the console, in history.csv and on its page, and a finding across it says which nights it
compares. A night set aside (history_checks.py) is a gap of the other kind: its file is there
but cannot be used.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable, Collection

from .history import FOLDER, Night, series_slug

GONE = "its file was deleted (the night after names it as the one before)"


def with_gaps(nights: list[Night], present: Collection[str],
              location_of: Callable[[str], str] = str) -> list[Night]:
    """`nights` (oldest first) with a gone night before each night whose `previous` file is
    not among `present` (the names of the series' files, `history/<series>/<night>.json`);
    `location_of` says where a name is (the store's location of it)."""
    known = set(present)
    gone: dict[str, Night] = {}
    for night in nights:
        previous = night.content.get("previous")
        if not isinstance(previous, str) or "/" in previous:
            continue
        folder = f"{FOLDER}/{series_slug(night.series)}"
        if f"{folder}/{previous}" in known:
            continue
        try:
            moment = datetime.strptime(previous[:16], "%Y%m%dT%H%M%SZ").replace(
                tzinfo=timezone.utc)
        except ValueError:
            continue
        gone.setdefault(previous, Night(night.series, night.suite, moment, {},
                                        location_of(f"{folder}/{previous}"), GONE, gone=True))
    if not gone:
        return nights
    return sorted([*nights, *gone.values()], key=lambda n: (n.night, n.location))
