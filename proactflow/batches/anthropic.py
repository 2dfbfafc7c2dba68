"""Anthropic's Message Batches API as a BatchProvider.

litellm 1.110 reads Anthropic batches but cannot create one, so proactflow speaks the API itself.
This module holds what the protocol's calls mean there: a batch created from
`{requests: [{custom_id, params}]}`, its progress, its results read back as request keys'
answers, a batch found again by its tag, a cancel. What a line holds and what its result
becomes is litellm's own conversion (anthropic_wire.py), so a batched call and an interactive
one end as the same cache record.

States: `in_progress` is in_progress, `canceling` cancelling; an `ended` batch is cancelled
when a cancel was asked, expired when some of its lines expired (24 hours passed), completed
otherwise. Canceled and expired lines are not in `results`: they go into the next batch.

Requests over HTTP, their retries and what their failures mean are anthropic_api.py's.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, Mapping, Sequence

from ..common.errors import ProviderRejected, UserError
from ..config.endpoints import split_credentials
from ..config.settings import ModelRole
from ..providers.chat import api_key_for
from . import anthropic_wire as wire
from .anthropic_api import API_VERSION, AnthropicApi, created_nothing
from .anthropic_wire import PROVIDER, line_error, progress_of
from .protocol import BatchLimits, BatchLine, BatchProgress, LineResult

RESULTS_KEPT_S = 29 * 86400
"""Anthropic keeps a batch's results for 29 days: an older batch cannot be recognised."""


class AnthropicBatches:
    """Anthropic's Message Batches API at one endpoint, with the role's key."""

    name = "anthropic"
    limits = BatchLimits(max_requests=100_000, max_bytes=256_000_000)

    def __init__(self, api_key: str, api_base: str | None = None, *, timeout_s: float = 120.0,
                 attempts: int = 6, retry_base_s: float = 1.0, retry_max_s: float = 60.0,
                 find_poll_s: float = 60.0, version: str = API_VERSION,
                 extra_headers: Mapping[str, str] | None = None):
        self.api = AnthropicApi(api_key, api_base, timeout_s=timeout_s, attempts=attempts,
                                retry_base_s=retry_base_s, retry_max_s=retry_max_s,
                                version=version, extra_headers=extra_headers)
        self.find_poll_s = find_poll_s
        self._lines: dict[str, BatchLine] = {}
        """The lines this object submitted, by request key, until their results are read: in
        the light of their request (see anthropic_wire.completion)."""
        self._batch_keys: dict[str, frozenset[str]] = {}
        self._not_created: set[str] = set()
        """Tags whose submit failed without creating a batch, as the server or the
        connection said."""
        self._sizes: dict[str, int] = {}

    def __repr__(self) -> str:  # never the key
        return f"AnthropicBatches({self.api.root!r})"

    # The protocol.

    def encoded_size(self, line: BatchLine) -> int:
        """Asked more than once per line (gathering, then splitting): converted once, until
        the line is submitted."""
        size = self._sizes.get(line.custom_id)
        if size is None:
            request = {"custom_id": "x" * (wire.TAG_CHARS + 43),
                       "params": wire.request_params_now(line.body)}
            size = self._sizes[line.custom_id] = \
                len(json.dumps(request, ensure_ascii=False).encode("utf-8")) + 2
        return size

    async def submit(self, lines: Sequence[BatchLine], tag: str) -> str:
        sending = False
        try:
            for line in lines:
                self._sizes.pop(line.custom_id, None)
            body, headers = await self._request_of(lines, tag)
            self._lines.update((line.custom_id, line) for line in lines)
            sending = True
            batch_id = await self.api.create(body, headers)
        except BaseException as exc:
            # Known to have made no batch: `find` says so at once instead of searching.
            if not sending or isinstance(exc, ProviderRejected) \
                    or created_nothing(exc.__cause__ or exc):
                self._not_created.add(tag)
            raise
        self._batch_keys[batch_id] = frozenset(line.custom_id for line in lines)
        return batch_id

    async def _request_of(self, lines: Sequence[BatchLine],
                          tag: str) -> tuple[bytes, dict[str, str]]:
        """The create request's body and its beta header."""
        if not lines or len(lines) > self.limits.max_requests:
            raise ValueError(f"a batch holds 1 to {self.limits.max_requests} lines, "
                             f"not {len(lines)}")
        requests, betas = [], set()
        for line in lines:
            params, line_betas = await wire.request_params(line.body)
            requests.append({"custom_id": wire.wire_id(line.custom_id, tag), "params": params})
            betas.update(line_betas)
        body = json.dumps({"requests": requests}, ensure_ascii=False).encode("utf-8")
        if len(body) > self.limits.max_bytes:
            raise ValueError(f"a batch of {len(body)} bytes is over Anthropic's "
                             f"{self.limits.max_bytes}")
        return body, {"anthropic-beta": ",".join(sorted(betas))} if betas else {}

    async def progress(self, batch_id: str) -> BatchProgress:
        return progress_of(await self.api.batch(batch_id))

    async def results(self, batch_id: str,
                      lines: Sequence[BatchLine] = ()) -> list[LineResult]:
        """Every answered or errored line of an ended batch. `lines`, the batch's lines when
        the caller has them, let a batch submitted by another process be read exactly as this
        one's own (anthropic_wire.completion says what differs without them)."""
        own = self._batch_keys.get(batch_id, frozenset())
        requests = {**{key: self._lines[key] for key in own if key in self._lines},
                    **{line.custom_id: line for line in lines}}
        found: list[LineResult] = []
        async for record in self.api.result_records(await self.api.batch(batch_id)):
            ids = wire.split_wire_id(str(record.get("custom_id", "")))
            result = record.get("result") or {}
            if ids is None or result.get("type") not in ("succeeded", "errored"):
                continue  # another client's line; or canceled, expired: sent again
            key = ids[1]
            if result["type"] == "succeeded":
                found.append(LineResult(key, wire.completion(result["message"],
                                                             requests.get(key)), 200))
            else:
                status, why = line_error(result.get("error"))
                found.append(LineResult(key, None, status, why))
        for key in self._batch_keys.pop(batch_id, ()):  # read: no longer needed
            self._lines.pop(key, None)
        return found

    async def cancel(self, batch_id: str) -> None:
        if (await self.progress(batch_id)).ended:
            return  # nothing left to stop (Anthropic refuses to cancel an ended batch)
        await self.api.cancel(batch_id)

    async def find(self, tag: str, *, created_after: float | None = None) -> str | None:
        """The batch whose lines carry `tag`'s mark, or None.

        Anthropic keeps no metadata on a batch and shows its lines only once it has ended, so
        a batch is recognised by the first line of its results. The API's batches (the
        workspace's, newest first) created after `created_after` (a Unix time; by default 29
        days ago, as long as results are kept) are looked at: an ended one is read, and when
        the tag is on none of them while some are still processing, this waits for those to end
        (looking again after 1 s, then half as long again each time up to `find_poll_s`; a batch
        ends within 24 hours) rather than guess:
        a guess either sends the lines again, paid twice, or waits on a batch that is not
        theirs. Limits: the wait can be long when other clients of the workspace have batches
        in progress (passing the time the tag was recorded, less the clocks' difference, keeps
        it to the batches created since); batches older than 29 days, or archived or deleted
        ones, are not found.
        """
        if tag in self._not_created:
            return None
        mark = wire.tag_mark(tag)
        since = created_after if created_after is not None else time.time() - RESULTS_KEPT_S
        pending: list[str] = []
        async for batch in self.api.listed(since):
            if batch.get("processing_status") != "ended":
                pending.append(str(batch["id"]))
            elif await self._carries(batch, mark):
                return str(batch["id"])
        wait = min(1.0, self.find_poll_s)
        while pending:
            await asyncio.sleep(wait)
            wait = min(wait * 1.5, self.find_poll_s)
            still: list[str] = []
            for batch_id in pending:
                batch = await self.api.batch(batch_id)
                if batch.get("processing_status") != "ended":
                    still.append(batch_id)
                elif await self._carries(batch, mark):
                    return batch_id
            pending = still
        return None

    # Recognising a batch.

    async def _carries(self, batch: Mapping[str, Any], mark: str) -> bool:
        """Whether an ended batch's lines carry `mark` (its first result line says)."""
        first: dict[str, Any] = {}
        async for record in self.api.result_records(batch, first_only=True):
            first = record
        ids = wire.split_wire_id(str(first.get("custom_id", "")))
        return ids is not None and ids[0] == mark


def for_role(role: ModelRole) -> AnthropicBatches:
    """The adapter with the key and endpoint an interactive call of this role would use: the
    variable the role names, a placeholder for a custom endpoint, else ANTHROPIC_API_KEY."""
    key = api_key_for(role) or os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise UserError(f"--batch: {role.model}: no Anthropic key (set ANTHROPIC_API_KEY, or "
                        "name the variable holding it with the role's api_key_env)")
    api_base, basic = split_credentials(role.api_base) if role.api_base else (None, None)
    return AnthropicBatches(key, api_base, extra_headers={"Authorization": basic} if basic
                            else None)
