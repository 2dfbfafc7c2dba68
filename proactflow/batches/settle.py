"""A store's batch records brought up to their providers' word, for `batches ls`, `batches
cancel` and `status`: a live batch's state read again (a cancelled batch shows as cancelled once
its provider says so), a record that never got its id found by its tag or closed when nothing
was created, a batch cancelled. Each answers in one line what it could not do, and goes on."""

from __future__ import annotations

import asyncio
import time

from .protocol import BatchProvider
from .providers import batch_provider
from .registry import NEVER_CREATED, BatchRecord, BatchRegistry
from .roles import role_of
from .transport import CLOCK_SKEW_S

ASK_TIMEOUT_S = 20.0
"""How long one question to a provider may take here: these commands are not runs."""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def _provider(record: BatchRecord) -> BatchProvider | None:
    try:
        return batch_provider(role_of(record))
    except Exception:  # a key variable unset, a model litellm no longer places
        return None


async def refreshed(record: BatchRecord, registry: BatchRegistry,
                    find: bool = False) -> tuple[BatchRecord, str | None]:
    """The record with its batch's state as its provider gives it now (recorded in the
    registry), and why it could not be read (None when it was). A record without an id is
    looked up by its tag only with `find` (a process may be creating it this very moment: only
    `batches cancel`, asked by the user, settles it)."""
    if not record.live or (not record.batch_id and not find):
        return record, None
    provider = _provider(record)
    if provider is None:
        return record, f"its provider {record.provider} cannot be reached from here"
    try:
        if not record.batch_id:
            found = await asyncio.wait_for(provider.find(
                record.tag, created_after=record.created - CLOCK_SKEW_S), ASK_TIMEOUT_S)
            if found is None:  # never created: its requests are in no batch
                record = record.with_(state=NEVER_CREATED, ended=time.time())
                await registry.put(record)
                return record, None
            record = record.with_(batch_id=found, state="validating",
                                  submitted=record.submitted or time.time())
            await registry.put(record)
        progress = await asyncio.wait_for(provider.progress(record.batch_id), ASK_TIMEOUT_S)
    except Exception as exc:
        return record, f"{record.provider} did not say ({_one_line(exc)})"
    now = record.with_(state=progress.status, done=progress.done, failed=progress.failed,
                       ended=time.time() if progress.ended else None)
    if now != record:
        await registry.put(now)
    return now, None


async def refresh_all(records: list[BatchRecord], registry: BatchRegistry
                      ) -> tuple[list[BatchRecord], list[str]]:
    """Every record, its live batches read again at their providers; with one line per batch
    whose state could not be read (it is shown as last recorded)."""
    out, problems = [], []
    for record in records:
        now, problem = await refreshed(record, registry)
        out.append(now)
        if problem is not None:
            problems.append(f"{now.batch_id}: state as last recorded, {problem}")
    return out, problems


async def cancel(record: BatchRecord, registry: BatchRegistry) -> str:
    """Cancel one live batch (a record without an id is first found by its tag, or closed when
    nothing was created); one line saying what was done, or what could not be."""
    name = record.batch_id or f"(id not recorded, tag {record.tag[:12]})"
    record, problem = await refreshed(record, registry, find=True)
    if problem is not None:
        return f"cannot cancel {name}: {problem}"
    if record.state == NEVER_CREATED:
        return f"dropped {name}: {record.provider} never created it ({record.model}, " \
               f"{record.total} lines, asked again by the next run)"
    if not record.live:
        return f"{record.batch_id} had already ended: {record.state}"
    provider = _provider(record)
    assert provider is not None  # refreshed reached it
    try:
        await asyncio.wait_for(provider.cancel(record.batch_id), ASK_TIMEOUT_S)
    except Exception as exc:
        return f"cannot cancel {record.batch_id}: {record.provider} said {_one_line(exc)}"
    record = record.with_(state="cancelling")
    await registry.put(record)
    record, _ = await refreshed(record, registry)
    return f"cancelling {record.batch_id} ({record.model}, {record.total} lines): " \
           f"{record.state} at {record.provider}"
