"""responses: the model under test's reply at every trigger (PROTOCOL.md step 2)."""

from __future__ import annotations

from typing import Any

import polars as pl

from ...providers.chat import ChatOutcome, ChatRequest
from ...providers.prompt_cache import CacheHint
from .tables import ResponseRow
from ...config.settings import ModelRole

STAGE = "responses"
VERSION = 2


def response_request(trigger: dict[str, Any], role: ModelRole,
                     sample_index: int = 0) -> ChatRequest:
    """The exact call for one trigger: optional system prompt, then the trigger's context. The
    dialogue's later triggers send all of it again, then more: a prefix for the provider's
    prompt cache."""
    messages = [(m["role"], m["content"]) for m in trigger["context"]]
    if role.generation.system_prompt:
        messages.insert(0, ("system", role.generation.system_prompt))
    return ChatRequest.build(role, messages, sample_index=sample_index,
                             cache=CacheHint(f"dialogue:{trigger['unique_id_eval']}",
                                             shared=len(messages), chain=True))


def planned_requests(triggers: pl.DataFrame, role: ModelRole, samples: int = 1):
    """(trigger, sample_index, request) for every evaluable trigger and sample, built lazily."""
    for trigger in triggers.filter(pl.col("evaluable")).iter_rows(named=True):
        for sample_index in range(samples):
            yield trigger, sample_index, response_request(trigger, role, sample_index)


def response_row(trigger: dict[str, Any], outcome: ChatOutcome | None, role: ModelRole,
                 sample_index: int) -> ResponseRow:
    """ok, a reply that is not an answer (empty, truncated, blocked), error (after retries), or
    unevaluable (no outcome: the trigger turn has no user message)."""
    common = dict(unique_id_eval=trigger["unique_id_eval"], turn=trigger["turn"],
                  phase=trigger["phase"], sample_index=sample_index, model=role.model)
    if outcome is None:
        return ResponseRow(**common, status="unevaluable", message=trigger["unevaluable_reason"],
                           response=None, finish_reason=None, prompt_tokens=None,
                           completion_tokens=None, latency_s=None, attempts=0,
                           request_key=None)
    return ResponseRow(
        **common, status=outcome.status, message=outcome.error,
        # A truncated or blocked reply keeps its text, to be read; it is never judged.
        response=outcome.content if outcome.status != "error" else None,
        finish_reason=outcome.finish_reason, prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
        cache_read_tokens=outcome.cache_read_tokens,
        cache_write_tokens=outcome.cache_write_tokens,
        attempts=outcome.attempts, request_key=outcome.request_key,
        served_model=outcome.served_model, system_fingerprint=outcome.system_fingerprint,
        litellm_version=outcome.litellm_version)
