"""What `proactflow batches ls` and `proactflow status` say about a store's batches."""

from __future__ import annotations

import time

from .registry import BatchRecord


def age(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours < 48 else f"{hours // 24} days"


def batch_line(record: BatchRecord, now: float | None = None) -> str:
    now = time.time() if now is None else now
    where = f" at {record.endpoint}" if record.endpoint else ""
    failed = f", {record.failed} failed" if record.failed else ""
    failed += f", {record.resent} sent again" if record.resent else ""
    return (f"{record.batch_id or '(id not recorded, tag ' + record.tag[:12] + ')'}  "
            f"{record.state:<13} {record.done}/{record.total} lines{failed}  {record.model}"
            f"{where} ({record.provider})  {age(now - record.created)} old")


def pending_lines(records: list[BatchRecord]) -> list[str]:
    """`status`: the batches still running at their provider, with their age; apart, the
    records whose batch may never have been created (their id was never recorded): those are
    not pending, a run or `batches cancel` settles them."""
    live = [record for record in records if record.live and record.batch_id]
    unsettled = [record for record in records if record.live and not record.batch_id]
    lines = []
    if live:
        lines += [f"batches     {len(live)} pending (re-run the command to collect them; "
                  "'proactflow batches cancel' stops them)",
                  *(f"  {batch_line(record)}" for record in live)]
    if unsettled:
        lines += [f"batches     {len(unsettled)} not known to exist (the process creating "
                  f"{'it' if len(unsettled) == 1 else 'them'} stopped before its id came back; "
                  "the next run, or 'proactflow batches cancel --all', finds or drops "
                  f"{'it' if len(unsettled) == 1 else 'them'})",
                  *(f"  {batch_line(record)}" for record in unsettled)]
    return lines
