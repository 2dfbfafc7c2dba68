"""What proactflow needs from a provider's batch API, whoever implements it.

A batch line is one chat request of the per-call cache: its `custom_id` is the request's cache
key, its body the request as OpenAI's chat completions endpoint takes it. A provider adapter
turns lines into the provider's format, and the provider's results back into OpenAI chat
completion objects, so that a batched call and an interactive one end as the same cache record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, Sequence

BatchStatus = Literal["submitting", "validating", "in_progress", "finalizing", "completed",
                      "failed", "expired", "cancelling", "cancelled"]
"""A batch's state in OpenAI's words; other providers' states are mapped onto these."""

ENDED: frozenset[str] = frozenset({"completed", "failed", "expired", "cancelled"})
"""States after which a batch changes no more: its finished lines are read, the rest sent again."""


class NotCreated(Exception):
    """What `submit` raises when the provider is known to have created no batch (its input was
    never accepted): the record is closed at once, without asking `find`. Raised from the
    provider's own error, which is what the caller reports."""


@dataclass(frozen=True)
class BatchLine:
    custom_id: str
    """The request's key in the per-call cache: how a result finds its call again."""
    body: dict[str, Any]
    """The request as OpenAI's /v1/chat/completions takes it (model as the provider names it,
    messages, generation settings), without credentials."""


@dataclass(frozen=True)
class BatchLimits:
    max_requests: int
    """Lines per batch at most (OpenAI 50,000; Anthropic 100,000)."""
    max_bytes: int
    """Size of one batch's encoded input at most (OpenAI 200 MB; Anthropic 256 MB)."""


@dataclass(frozen=True)
class BatchProgress:
    status: BatchStatus
    total: int
    """Lines in the batch."""
    done: int
    """Lines finished, answered or failed."""
    failed: int
    """Lines that failed at the provider."""

    @property
    def ended(self) -> bool:
        return self.status in ENDED


@dataclass(frozen=True)
class LineResult:
    custom_id: str
    response: dict[str, Any] | None
    """An OpenAI chat completion object (choices, usage, model, system_fingerprint), or None
    when the line failed."""
    status_code: int | None = None
    """The HTTP status the provider gives the line (200 for an answer)."""
    error: str | None = None
    """One line saying why the line failed (the provider's message), None for an answer."""


class BatchProvider(Protocol):
    """One provider's batch API at one endpoint, with the credentials of the role using it."""

    name: str
    """The provider as litellm names it: "openai", "azure", "anthropic", ..."""
    limits: BatchLimits

    def encoded_size(self, line: BatchLine) -> int:
        """Bytes this line adds to a batch's input, to split batches by `limits.max_bytes`."""
        ...

    async def submit(self, lines: Sequence[BatchLine], tag: str) -> str:
        """Upload `lines` and create one batch of them; return its id. `tag` is recorded in the
        store before this is called and is attached to the batch (its metadata), so that `find`
        recognises it after a crash between creating the batch and recording its id. Raises
        NotCreated (from the provider's error) when no batch can exist, e.g. the upload of its
        input failed."""
        ...

    async def find(self, tag: str, *, created_after: float | None = None) -> str | None:
        """The id of a batch created with `tag`, or None when there is none (the crash came
        before the batch was created: its lines may be sent again). `created_after` (a Unix
        time, the record's own minus some clock skew) bounds the search where the provider's
        listing is long."""
        ...

    async def progress(self, batch_id: str) -> BatchProgress:
        ...

    async def results(self, batch_id: str, lines: Sequence[BatchLine] = ()) -> list[LineResult]:
        """Every finished line of a batch (after it ended; lines it never ran are absent).
        `lines`: those of the batch the caller holds, for a provider whose replies are read
        against their request (a batch another process submitted reads as this one's own)."""
        ...

    async def cancel(self, batch_id: str) -> None:
        ...
