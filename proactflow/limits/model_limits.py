"""Limits of one model: calls in flight, requests and tokens per minute.

A limit belongs to the model (its model string at its effective endpoint), not to a run: every
run of a process, of a host sharing a store, or of every host sharing a database that calls the
model keeps to it together (see inflight.py and ratelimit.py). They change no output, so they
enter no key: neither an artifact's nor the per-call cache's.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_CONCURRENCY = 1024


class Limits(BaseModel):
    """A model's limits; None: the run's default (--concurrency, --rpm, --tpm)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    concurrency: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY,
        description="Calls in flight to this model at most, together across every run that "
                    "calls it (in this process, on this store's host, or on the database).")
    share: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY,
        description="The part of `concurrency` this process may use, when a sweep spread over "
                    "processes deals a model's calls between them (process_groups.py); None: "
                    "all of it. The shared slots still count up to `concurrency`.")
    rpm: float | None = Field(default=None, gt=0,
                              description="Requests per minute to this model, shared likewise.")
    tpm: float | None = Field(default=None, gt=0,
                              description="Tokens per minute to this model, shared likewise.")

    def over(self, default: Limits) -> Limits:
        """These limits where set, `default`'s elsewhere."""
        return default.model_copy(update=self.model_dump(exclude_none=True))


def target(model: str, endpoint: str | None) -> str:
    """What a limit belongs to: the model at its effective endpoint (`ModelRole.endpoint`)."""
    return f"{model}@{endpoint or 'provider'}"
