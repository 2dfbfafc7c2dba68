"""responses: the model under test's reply at every trigger (PROTOCOL.md step 2)."""

from __future__ import annotations

from typing import Any, Callable

import polars as pl

from ...llm import ChatClient, ChatRequest
from ...pools import run_bounded
from ...schemas.arrow import to_frame
from .tables import ResponseRow
from ...settings import ModelRole

STAGE = "responses"
VERSION = 2


def response_request(trigger: dict[str, Any], role: ModelRole,
                     sample_index: int = 0) -> ChatRequest:
    """The exact call for one trigger: optional system prompt, then the trigger's context."""
    messages = [(m["role"], m["content"]) for m in trigger["context"]]
    if role.generation.system_prompt:
        messages.insert(0, ("system", role.generation.system_prompt))
    return ChatRequest.build(role, messages, sample_index=sample_index)


def planned_requests(triggers: pl.DataFrame, role: ModelRole, samples: int = 1):
    """(trigger, sample_index, request) for every evaluable trigger and sample, built lazily."""
    for trigger in triggers.filter(pl.col("evaluable")).iter_rows(named=True):
        for sample_index in range(samples):
            yield trigger, sample_index, response_request(trigger, role, sample_index)


async def generate_responses(triggers: pl.DataFrame, role: ModelRole, client: ChatClient, *,
                             samples: int = 1, concurrency: int = 16,
                             on_row: Callable[[ResponseRow], None] | None = None) -> pl.DataFrame:
    """One ResponseRow per (trigger, sample): ok, a reply that is not an answer (empty,
    truncated, blocked), error (after retries) or unevaluable.
    `on_row` sees every row as soon as it exists."""
    evaluable = triggers.filter(pl.col("evaluable"))

    async def answer(job: tuple[int, int]) -> ResponseRow:
        index, sample_index = job
        trigger = evaluable.row(index, named=True)
        request = response_request(trigger, role, sample_index)
        outcome = await client.call(request)
        return ResponseRow(
            unique_id_eval=trigger["unique_id_eval"], turn=trigger["turn"],
            phase=trigger["phase"], sample_index=sample_index, model=role.model,
            status=outcome.status, message=outcome.error,
            # A truncated or blocked reply keeps its text, to be read; it is never judged.
            response=outcome.content if outcome.status != "error" else None,
            finish_reason=outcome.finish_reason, prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
            attempts=outcome.attempts, request_key=outcome.request_key,
            served_model=outcome.served_model, system_fingerprint=outcome.system_fingerprint,
            litellm_version=outcome.litellm_version,
        )

    jobs = [(index, sample) for index in range(evaluable.height) for sample in range(samples)]
    answered = await run_bounded(jobs, answer, concurrency, on_row)
    unevaluable = [
        ResponseRow(unique_id_eval=t["unique_id_eval"], turn=t["turn"], phase=t["phase"],
                    sample_index=s, model=role.model, status="unevaluable",
                    message=t["unevaluable_reason"], response=None, finish_reason=None,
                    prompt_tokens=None, completion_tokens=None, latency_s=None, attempts=0,
                    request_key=None)
        for t in triggers.filter(~pl.col("evaluable")).iter_rows(named=True)
        for s in range(samples)
    ]
    if on_row is not None:
        for row in unevaluable:
            on_row(row)
    frame = to_frame(answered + unevaluable, ResponseRow)
    return frame.sort("unique_id_eval", "turn", "sample_index")
