"""Anthropic's Message Batches API over HTTP: its requests sent, retried and their failures named.

Apart from the adapter (anthropic.py) so that what a request and its failures are stays out of
what the protocol's calls mean. Each request is made with httpx, asynchronously and bounded in
time: POST /v1/messages/batches and .../cancel, GET /v1/messages/batches/{id}, its JSONL results
and the paginated list.

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
import random
from typing import Any, AsyncIterator, Mapping
from urllib.parse import urlsplit

import httpx

from ..common.errors import EndpointDown, ProviderRejected
from ..providers.provider_errors import AttemptFailed, classify
from . import anthropic_wire as wire
from .anthropic_wire import api_root

API_VERSION = "2023-06-01"


class AnthropicApi:
    """The Message Batches API at one endpoint, with one key."""

    def __init__(self, api_key: str, api_base: str | None = None, *, timeout_s: float = 120.0,
                 attempts: int = 6, retry_base_s: float = 1.0, retry_max_s: float = 60.0,
                 version: str = API_VERSION, extra_headers: Mapping[str, str] | None = None):
        self._key = api_key
        self._extra_headers = dict(extra_headers or {})
        self.root = api_root(api_base)
        self.timeout_s, self.attempts = timeout_s, attempts
        self.retry_base_s, self.retry_max_s = retry_base_s, retry_max_s
        self.version = version
        self.page_size = 100
        """Batches per page of the list `listed` reads."""

    def __repr__(self) -> str:  # never the key
        return f"AnthropicApi({self.root!r})"

    @property
    def label(self) -> str:
        return f"Anthropic's batch API at {self.root}"

    async def create(self, body: bytes, headers: Mapping[str, str]) -> str:
        """The new batch's id; retried only while the server is known to have created none."""
        response = await self.send("POST", "/v1/messages/batches", content=body,
                                   headers=headers, creating=True)
        return str(response.json()["id"])

    async def cancel(self, batch_id: str) -> None:
        await self.send("POST", f"/v1/messages/batches/{batch_id}/cancel")

    async def batch(self, batch_id: str) -> dict[str, Any]:
        return (await self.send("GET", f"/v1/messages/batches/{batch_id}")).json()

    async def listed(self, since: float) -> AsyncIterator[dict[str, Any]]:
        """The workspace's batches created at or after `since`, newest first."""
        after: str | None = None
        while True:
            query = {"limit": str(self.page_size), **({"after_id": after} if after else {})}
            page = (await self.send("GET", "/v1/messages/batches", params=query)).json()
            for batch in page.get("data") or []:
                if (wire.moment(batch.get("created_at")) or 0.0) < since:
                    return
                yield batch
            after = page.get("last_id")
            if not page.get("has_more") or not after:
                return

    def _results_url(self, batch: Mapping[str, Any]) -> str:
        url = batch.get("results_url") or f"{self.root}/v1/messages/batches/{batch['id']}/results"
        ours, theirs = urlsplit(self.root), urlsplit(url)
        if (theirs.scheme, theirs.netloc) != (ours.scheme, ours.netloc):
            raise ProviderRejected(f"{self.label}: the results of batch {batch['id']} are at "
                                   f"{theirs.scheme}://{theirs.netloc}, another origin: the key "
                                   "is not sent there")
        return url

    async def result_records(self, batch: Mapping[str, Any],
                             first_only: bool = False) -> AsyncIterator[dict[str, Any]]:
        """The lines of an ended batch's results file, each once however often it is retried."""
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

    async def send(self, method: str, path: str, *, content: bytes | None = None,
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
                                          or created_nothing(exc))
        raise AssertionError("unreachable: the last failed attempt raises")

    async def _after_failure(self, exc: Exception, attempt: int, *, retry: bool) -> None:
        """Wait before the next attempt, or raise the failure as the project's error."""
        if isinstance(exc, ProviderRejected):
            raise exc
        failure: AttemptFailed = classify(exc, self.label, self.root)  # raises when fatal
        if failure.refusal is not None:
            raise ProviderRejected(f"{self.label} refused the request ({failure})") from exc
        if not (failure.retryable and retry) or attempt >= self.attempts:
            note = "" if retry else \
                " (the batch may have been created: the next run finds it by its tag)"
            raise EndpointDown(f"{self.label}: {failure}{note}") from exc
        ceiling = min(self.retry_max_s, self.retry_base_s * 2 ** (attempt - 1))
        delay = random.uniform(0, ceiling)
        await asyncio.sleep(max(delay, min(failure.retry_after or 0.0, self.retry_max_s)))


def created_nothing(exc: BaseException) -> bool:
    """Whether a failed create certainly made no batch: rate limited, or never connected."""
    if getattr(exc, "status_code", None) == 429:
        return True
    return isinstance(exc, httpx.ConnectError)
