"""Anthropic's Message Batches API as a BatchProvider.

litellm 1.110 reads Anthropic batches but cannot create one, so this module speaks the API
itself (httpx, asynchronously, every request bounded in time): POST /v1/messages/batches with
`{requests: [{custom_id, params}]}`, GET /v1/messages/batches/{id}, its JSONL results, POST
.../cancel and the paginated list. What a line holds and what its result becomes is litellm's
own conversion (anthropic_wire.py), so a batched call and an interactive one end as the same
cache record.

States: `in_progress` is in_progress, `canceling` cancelling; an `ended` batch is cancelled
when a cancel was asked, expired when some of its lines expired (24 hours passed), completed
otherwise. Canceled and expired lines are not in `results`: they go into the next batch.

Failures of the API itself go through the providers' classification (provider_errors.classify):
a rejected key, an unknown batch or endpoint and an exhausted quota stop the run
(ProviderRejected); 429, 5xx and unreachable hosts are retried with backoff (the Retry-After
asked for) and, when they persist, stop it as EndpointDown; a batch refused as sent (400, 413) is
ProviderRejected. Creating a batch is retried only when the server said it created nothing
(429, or a connection refused): after a timeout or a 5xx the batch may exist, so the failure
is raised and the next run finds it by its tag. Messages are one line; the key is sent only to
the API's own origin and never appears in a message.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from typing import Any, AsyncIterator, Mapping, Sequence
from urllib.parse import urlsplit

import httpx

from ..common.errors import EndpointDown, ProviderRejected, UserError
from ..config.endpoints import split_credentials
from ..config.settings import ModelRole
from ..providers.chat import api_key_for
from ..providers.provider_errors import AttemptFailed, classify
from . import anthropic_wire as wire
from .anthropic_wire import PROVIDER, api_root, line_error, progress_of
from .protocol import BatchLimits, BatchLine, BatchProgress, LineResult

API_VERSION = "2023-06-01"
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
        self._key = api_key
        self._extra_headers = dict(extra_headers or {})
        self.root = api_root(api_base)
        self.timeout_s, self.attempts = timeout_s, attempts
        self.retry_base_s, self.retry_max_s = retry_base_s, retry_max_s
        self.find_poll_s = find_poll_s
        self.version = version
        self.page_size = 100
        """Batches per page of the list `find` reads."""
        self._lines: dict[str, BatchLine] = {}
        """The lines this object submitted, by request key, until their results are read: in
        the light of their request (see anthropic_wire.completion)."""
        self._batch_keys: dict[str, frozenset[str]] = {}
        self._not_created: set[str] = set()
        self._sizes: dict[str, int] = {}
        """Tags whose submit failed without creating a batch, as the server or the
        connection said."""

    def __repr__(self) -> str:  # never the key
        return f"AnthropicBatches({self.root!r})"

    @property
    def _label(self) -> str:
        return f"Anthropic's batch API at {self.root}"

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
            response = await self._send("POST", "/v1/messages/batches", content=body,
                                        headers=headers, creating=True)
        except BaseException as exc:
            # Known to have made no batch: `find` says so at once instead of searching.
            if not sending or isinstance(exc, ProviderRejected) \
                    or _created_nothing(exc.__cause__ or exc):
                self._not_created.add(tag)
            raise
        batch_id = str(response.json()["id"])
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
        return progress_of(await self._batch(batch_id))

    async def results(self, batch_id: str,
                      lines: Sequence[BatchLine] = ()) -> list[LineResult]:
        """Every answered or errored line of an ended batch. `lines`, the batch's lines when
        the caller has them, let a batch submitted by another process be read exactly as this
        one's own (anthropic_wire.completion says what differs without them)."""
        own = self._batch_keys.get(batch_id, frozenset())
        requests = {**{key: self._lines[key] for key in own if key in self._lines},
                    **{line.custom_id: line for line in lines}}
        found: list[LineResult] = []
        async for record in self._result_records(await self._batch(batch_id)):
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
        await self._send("POST", f"/v1/messages/batches/{batch_id}/cancel")

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
        async for batch in self._listed(since):
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
                batch = await self._batch(batch_id)
                if batch.get("processing_status") != "ended":
                    still.append(batch_id)
                elif await self._carries(batch, mark):
                    return batch_id
            pending = still
        return None

    # The API.

    async def _batch(self, batch_id: str) -> dict[str, Any]:
        return (await self._send("GET", f"/v1/messages/batches/{batch_id}")).json()

    async def _listed(self, since: float) -> AsyncIterator[dict[str, Any]]:
        """The workspace's batches created at or after `since`, newest first."""
        after: str | None = None
        while True:
            query = {"limit": str(self.page_size), **({"after_id": after} if after else {})}
            page = (await self._send("GET", "/v1/messages/batches", params=query)).json()
            for batch in page.get("data") or []:
                if (wire.moment(batch.get("created_at")) or 0.0) < since:
                    return
                yield batch
            after = page.get("last_id")
            if not page.get("has_more") or not after:
                return

    async def _carries(self, batch: Mapping[str, Any], mark: str) -> bool:
        """Whether an ended batch's lines carry `mark` (its first result line says)."""
        first: dict[str, Any] = {}
        async for record in self._result_records(batch, first_only=True):
            first = record
        ids = wire.split_wire_id(str(first.get("custom_id", "")))
        return ids is not None and ids[0] == mark

    def _results_url(self, batch: Mapping[str, Any]) -> str:
        url = batch.get("results_url") or f"{self.root}/v1/messages/batches/{batch['id']}/results"
        ours, theirs = urlsplit(self.root), urlsplit(url)
        if (theirs.scheme, theirs.netloc) != (ours.scheme, ours.netloc):
            raise ProviderRejected(f"{self._label}: the results of batch {batch['id']} are at "
                                   f"{theirs.scheme}://{theirs.netloc}, another origin: the key "
                                   "is not sent there")
        return url

    async def _result_records(self, batch: Mapping[str, Any],
                              first_only: bool = False) -> AsyncIterator[dict[str, Any]]:
        if batch.get("processing_status") != "ended":
            raise ValueError(f"batch {batch.get('id')} has not ended: no results yet")
        url = self._results_url(batch)
        read = 0  # lines already given: a retry skips them (the file does not change)
        for attempt in range(1, self.attempts + 1):
            try:
                async with self._client() as client, client.stream(
                        "GET", url, headers=self._headers()) as response:
                    if response.status_code != 200:
                        await response.aread()
                        raise wire.as_exception(response.status_code, response.text,
                                                response.headers)
                    seen = 0
                    async for text in response.aiter_lines():
                        if not text.strip():
                            continue
                        seen += 1
                        if seen > read:
                            read = seen
                            yield json.loads(text)
                            if first_only:
                                return
                    return
            except Exception as exc:  # classify sorts the many types a failure arrives as
                await self._after_failure(exc, attempt, retry=True)

    # HTTP.

    def _headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {"x-api-key": self._key, "anthropic-version": self.version,
                "content-type": "application/json", **self._extra_headers, **(extra or {})}

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s, connect=10.0),
                                 follow_redirects=False, trust_env=False)

    async def _send(self, method: str, path: str, *, content: bytes | None = None,
                    params: Mapping[str, str] | None = None,
                    headers: Mapping[str, str] | None = None,
                    creating: bool = False) -> httpx.Response:
        for attempt in range(1, self.attempts + 1):
            try:
                async with self._client() as client:
                    response = await client.request(method, self.root + path, content=content,
                                                    params=params,
                                                    headers=self._headers(headers))
                if response.status_code == 200:
                    return response
                raise wire.as_exception(response.status_code, response.text, response.headers)
            except Exception as exc:  # classify sorts the many types a failure arrives as
                await self._after_failure(exc, attempt, retry=not creating
                                          or _created_nothing(exc))
        raise AssertionError("unreachable: the last failed attempt raises")

    async def _after_failure(self, exc: Exception, attempt: int, *, retry: bool) -> None:
        """Wait before the next attempt, or raise the failure as the project's error."""
        if isinstance(exc, ProviderRejected):
            raise exc
        failure: AttemptFailed = classify(exc, self._label, self.root)  # raises when fatal
        if failure.refusal is not None:
            raise ProviderRejected(f"{self._label} refused the request ({failure})") from exc
        if not (failure.retryable and retry) or attempt >= self.attempts:
            note = "" if retry else \
                " (the batch may have been created: the next run finds it by its tag)"
            raise EndpointDown(f"{self._label}: {failure}{note}") from exc
        ceiling = min(self.retry_max_s, self.retry_base_s * 2 ** (attempt - 1))
        delay = random.uniform(0, ceiling)
        await asyncio.sleep(max(delay, failure.retry_after or 0.0))


def _created_nothing(exc: BaseException) -> bool:
    """Whether a failed create certainly made no batch: rate limited, or never connected."""
    if getattr(exc, "status_code", None) == 429:
        return True
    return isinstance(exc, httpx.ConnectError)


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
