"""OpenAI's batch API, and the providers that speak it (Azure OpenAI, hosted vLLM, litellm
proxies), through litellm's files and batches API: the lines uploaded as a JSONL file, a batch
created of it with our tag in its metadata, its output and error files read back."""

from __future__ import annotations

import json
from typing import Any, Sequence

import litellm

from ..config.endpoints import split_credentials
from ..config.settings import ModelRole
from ..providers.chat import api_key_for
from .protocol import BatchLimits, BatchLine, BatchProgress, LineResult, NotCreated

PROVIDERS = ("openai", "azure", "hosted_vllm", "litellm_proxy")
"""litellm's providers whose batches are OpenAI's (files, /v1/batches, JSONL output)."""
LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
TAG_FIELD = "proactflow_tag"
"""The batch's metadata entry holding our tag."""
FIND_PAGES = 20
"""Pages of 100 batches, newest first, looked through for a tag: a batch whose id was not
recorded was created moments before its process died, so it is among the newest."""


class OpenAIBatches:
    """One OpenAI-style batch endpoint, with a role's credentials (never recorded)."""

    limits = LIMITS

    def __init__(self, provider: str, api_base: str | None, api_key: str | None,
                 extra_headers: dict[str, str] | None = None):
        self.name = provider
        self._auth: dict[str, Any] = {"custom_llm_provider": provider}
        if api_base:
            self._auth["api_base"] = api_base
        if api_key:
            self._auth["api_key"] = api_key
        if extra_headers:
            self._auth["extra_headers"] = extra_headers

    @staticmethod
    def encode(line: BatchLine) -> bytes:
        return json.dumps({"custom_id": line.custom_id, "method": "POST",
                           "url": "/v1/chat/completions", "body": line.body},
                          separators=(",", ":")).encode() + b"\n"

    def encoded_size(self, line: BatchLine) -> int:
        return len(self.encode(line))

    async def submit(self, lines: Sequence[BatchLine], tag: str) -> str:
        content = b"".join(self.encode(line) for line in lines)
        try:
            uploaded = await litellm.acreate_file(
                file=(f"proactflow-{tag}.jsonl", content, "application/jsonl"),
                purpose="batch", **self._auth)
        except Exception as exc:  # no input file, no batch
            raise NotCreated(f"the batch's input file was not uploaded: {exc}") from exc
        batch = await litellm.acreate_batch(
            completion_window="24h", endpoint="/v1/chat/completions",
            input_file_id=uploaded.id, metadata={TAG_FIELD: tag}, **self._auth)
        return str(batch.id)

    async def find(self, tag: str, *, created_after: float | None = None) -> str | None:
        after: str | None = None
        for _ in range(FIND_PAGES):
            page = await litellm.alist_batches(after=after, limit=100, **self._auth)
            batches = list(getattr(page, "data", None) or [])
            for batch in batches:
                if (_field(batch, "metadata") or {}).get(TAG_FIELD) == tag:
                    return str(_field(batch, "id"))
            if not batches or not getattr(page, "has_more", False):
                return None
            oldest = _field(batches[-1], "created_at")
            if created_after is not None and oldest is not None and oldest < created_after:
                return None  # newest first: the rest were created before the record
            after = str(_field(batches[-1], "id"))
        return None

    async def progress(self, batch_id: str) -> BatchProgress:
        batch = await litellm.aretrieve_batch(batch_id=batch_id, **self._auth)
        counts = _field(batch, "request_counts")
        total = int(_field(counts, "total") or 0) if counts is not None else 0
        completed = int(_field(counts, "completed") or 0) if counts is not None else 0
        failed = int(_field(counts, "failed") or 0) if counts is not None else 0
        return BatchProgress(status=str(batch.status), total=total,  # type: ignore[arg-type]
                             done=completed + failed, failed=failed)

    async def results(self, batch_id: str, lines: Sequence[BatchLine] = ()) -> list[LineResult]:
        batch = await litellm.aretrieve_batch(batch_id=batch_id, **self._auth)
        found: list[LineResult] = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await litellm.afile_content(file_id=file_id, **self._auth)
            for raw in content.content.decode().splitlines():
                if raw.strip():
                    found.append(line_result(json.loads(raw)))
        return found

    async def cancel(self, batch_id: str) -> None:
        await litellm.acancel_batch(batch_id=batch_id, **self._auth)


def line_result(line: dict[str, Any]) -> LineResult:
    """One line of an output or error file: an answer (status 200), or why it failed."""
    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body")
    if status == 200 and isinstance(body, dict) and body.get("choices") is not None:
        return LineResult(line["custom_id"], body, 200)
    error = line.get("error")
    if not error and isinstance(body, dict):
        error = body.get("error")
    message = (error.get("message") if isinstance(error, dict) else str(error or "")) or \
        f"the line failed (HTTP {status})"
    return LineResult(line["custom_id"], None, status, message.splitlines()[0][:500])


def for_role(role: ModelRole) -> OpenAIBatches:
    _, provider, _, _ = litellm.get_llm_provider(role.model, api_base=role.api_base)
    api_base, basic = split_credentials(role.api_base) if role.api_base else (None, None)
    return OpenAIBatches(provider, api_base, api_key_for(role),
                         {"Authorization": basic} if basic else None)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)
