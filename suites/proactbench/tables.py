"""One row model per artifact table; `arrow_schema(Model)` gives each table's Parquet schema.

Every table is keyed by (`unique_id_eval`, `turn`, `sample_index`) where it has those columns, and
every trigger of the corpus has a row in every table: a trigger that could not be evaluated or
whose call failed carries a status and a message instead of disappearing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..columns import (CallLatency, CompletionTokens, JudgeCompletionTokens, JudgeLatency,
                      JudgePromptTokens, JudgeRequestKey, ModelUnderTest, PromptTokens, RequestKey)

from .corpus import Rubric
from .judge import Score


class Message(BaseModel):
    """One chat message."""

    role: Literal["system", "user", "assistant"] = Field(description="Who speaks.")
    content: str = Field(description="What is said.")


class TriggerRow(BaseModel):
    """One trigger point of the corpus with everything needed to evaluate it."""

    unique_id_eval: str = Field(description="Dialogue primary key.")
    dialogue_index: int = Field(description="0-based position of the dialogue in the corpus.")
    blueprint_id: str = Field(description="Blueprint of the dialogue.")
    scenario_id: str = Field(description="Scenario of the dialogue.")
    uuid: str = Field(description="Persona/scenario uuid of the dialogue.")
    category_key: str = Field(description="Persona category.")
    style_combination_index: int = Field(description="User style mix index (1-24).")
    source_evaluated_model: str = Field(description="Model behind the curation-time responses.")
    turn: int = Field(description="Turn the trigger is declared for.")
    phase: str = Field(description="EMERGENT, CRITICAL or RECOVERY.")
    rubric: Rubric = Field(description="The trigger's rubric.")
    context: list[Message] = Field(
        description="Messages shown to the model under test (PROTOCOL.md step 1).")
    user_message: str | None = Field(description="The user message of the trigger turn.")
    curation_response: str | None = Field(
        description="The curation-time assistant response at the trigger turn.")
    evaluable: bool = Field(description="False when the trigger turn has no user message.")
    unevaluable_reason: str | None = Field(description="Why the trigger cannot be evaluated.")


ResponseStatus = Literal["ok", "error", "unevaluable", "empty", "truncated", "blocked",
                         "refused"]
"""ok: an answer. error: the call failed after retries. unevaluable: no user message at the trigger
turn. empty, truncated, blocked: the provider answered but not with an answer (no content; cut at
max_tokens or by the model's context; stopped by a content filter or refused): such a reply is
never judged. refused: the server refused the request as sent (e.g. longer than its context):
never judged, never asked again unless --refresh."""

NON_ANSWER_STATUSES: dict[str, str] = {
    "empty": "empty_response", "truncated": "truncated_response", "blocked": "blocked_response",
    "refused": "refused"}
"""Response status of a reply that is not an answer -> the judgment status it carries."""


class ResponseRow(BaseModel):
    """The model under test's regenerated reply at one trigger."""

    unique_id_eval: str = Field(description="Dialogue primary key.")
    turn: int = Field(description="Trigger turn.")
    phase: str = Field(description="EMERGENT, CRITICAL or RECOVERY.")
    sample_index: int = Field(description="Which sample of this trigger (0 unless sampling).")
    model: ModelUnderTest
    status: ResponseStatus = Field(
        description="ok; error (the call failed after retries); unevaluable (no user message); "
                    "empty (no content), truncated (finish_reason length: the message says "
                    "whether max_tokens or the model's context cut it), blocked (content filter "
                    "or refusal): not answers, never judged; refused (the server refused the "
                    "request as sent).")
    message: str | None = Field(description="Error message or unevaluable reason.")
    response: str | None = Field(description="The regenerated assistant reply.")
    finish_reason: str | None = Field(description="Provider finish reason, e.g. stop, length.")
    prompt_tokens: PromptTokens
    completion_tokens: CompletionTokens
    cache_read_tokens: int | None = Field(
        default=None, description="Of prompt_tokens, read from the provider's prompt cache "
                                  "(billed at its cache price; None: no call, or stored before).")
    cache_write_tokens: int | None = Field(
        default=None, description="Of prompt_tokens, written to the provider's prompt cache.")
    latency_s: CallLatency
    attempts: int = Field(description="HTTP attempts the call took (0 when not called).")
    request_key: RequestKey
    served_model: str | None = Field(
        default=None, description="The model the provider says answered (its `model` field).")
    system_fingerprint: str | None = Field(
        default=None, description="The provider's system_fingerprint of the answering backend.")
    litellm_version: str | None = Field(
        default=None, description="litellm version that made the call (None when not called).")


JudgmentStatus = Literal["scored", "skipped", "judge_error", "generation_error", "unevaluable",
                         "empty_response", "truncated_response", "blocked_response", "refused"]


class JudgmentRow(BaseModel):
    """The judge's verdict on one regenerated reply."""

    unique_id_eval: str = Field(description="Dialogue primary key.")
    turn: int = Field(description="Trigger turn.")
    phase: str = Field(description="EMERGENT, CRITICAL or RECOVERY.")
    sample_index: int = Field(description="Which sample of this trigger.")
    model: ModelUnderTest
    judge: str = Field(description="Judge model.")
    status: JudgmentStatus = Field(
        description="scored; skipped (judge declined); judge_error; generation_error; "
                    "unevaluable; empty_response, truncated_response, blocked_response (the "
                    "model's reply was not an answer); refused (the server refused the model's "
                    "or the judge's request as sent: not retried by a re-run). Only scored rows "
                    "count in rates.")
    score: Score | None = Field(description="PASS, PARTIAL or FAIL when scored.")
    rationale: str | None = Field(description="The judge's rationale.")
    evidence: str | None = Field(description="The quote the judge gave as evidence.")
    evidence_verbatim: bool | None = Field(
        description="Whether the evidence occurs in the response (whitespace-normalised).")
    message: str | None = Field(description="Error message or reason when not scored.")
    prompt_tokens: JudgePromptTokens
    cache_read_tokens: int | None = Field(
        default=None, description="Of prompt_tokens, read from the provider's prompt cache.")
    cache_write_tokens: int | None = Field(
        default=None, description="Of prompt_tokens, written to the provider's prompt cache.")
    completion_tokens: JudgeCompletionTokens
    latency_s: JudgeLatency
    attempts: int = Field(description="Judge calls made for this row, retries included.")
    judge_prompt_sha256: str = Field(description="sha256 of the judge system prompt used.")
    request_key: JudgeRequestKey
    served_model: str | None = Field(
        default=None, description="The judge model the provider says answered.")
    system_fingerprint: str | None = Field(
        default=None, description="The provider's system_fingerprint of the judge's backend.")
    litellm_version: str | None = Field(
        default=None, description="litellm version that made the judge call.")


class PhaseScoreRow(BaseModel):
    """Aggregate scores of one (model, judge) pair in one phase, or OVERALL."""

    model_config = ConfigDict(populate_by_name=True)

    model: ModelUnderTest
    judge: str = Field(description="Judge model.")
    judge_prompt_sha256: str = Field(description="sha256 of the judge system prompt used.")
    phase: str = Field(description="EMERGENT, CRITICAL, RECOVERY or OVERALL.")
    triggers: int = Field(description="Trigger rows in this phase.")
    evaluated: int = Field(description="PASS + PARTIAL + FAIL.")
    pass_: int = Field(alias="pass", description="Triggers scored PASS.")
    partial: int = Field(description="Triggers scored PARTIAL.")
    fail: int = Field(description="Triggers scored FAIL.")
    not_evaluated: int = Field(
        description="triggers - evaluated: skipped, unevaluable, generation_errors, judge_errors, "
                    "refused and the three *_responses columns.")
    skipped: int = Field(description="The judge answered SKIPPED.")
    unevaluable: int = Field(description="The trigger turn has no user message.")
    generation_errors: int = Field(description="The model under test's call failed.")
    judge_errors: int = Field(description="The judge call failed or its reply was invalid.")
    pass_rate: float | None = Field(description="pass / evaluated (null when none evaluated).")
    partial_rate: float | None = Field(description="partial / evaluated.")
    weighted_score: float | None = Field(description="(pass + 0.5 partial) / evaluated.")
    empty_responses: int = Field(default=0, description="The model's reply had no content.")
    truncated_responses: int = Field(
        default=0, description="The model's reply was cut at max_tokens or by the model's "
                               "context (finish_reason length; the row's message says which).")
    blocked_responses: int = Field(
        default=0, description="The model's reply was stopped by a content filter or refused.")
    refused: int = Field(
        default=0, description="The server refused the model's or the judge's request as sent "
                               "(too long for its context, a parameter it does not take).")
