"""The four tables of Proactive Agent's ProactiveBench: events (samples), the agent's replies,
the judge's verdicts, and the per-split metrics.

Every event of every trace has a row in every table: an event whose call failed or whose reply
was not the protocol's JSON carries a status and a message instead of disappearing. Upstream
does not skip such an event either: it keeps the test file's `{"candidate_task": [...]}` as the
prediction, and its judge judges the literal "candidate_task" as a proposal. That verdict is
kept beside the status (`judged_candidate_task`), counted in metrics.csv as upstream counts it,
and left out of the strict counts of split_scores.csv.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..columns import (CallLatency, CompletionTokens, FinishReason, JudgeCompletionTokens,
                      JudgeLatency, JudgePromptSha, JudgePromptTokens, JudgeRequestKey,
                      LitellmVersion, ModelUnderTest, NotOkReason, PromptTokens, RequestKey,
                      SystemFingerprint)


class EventRow(BaseModel):
    """One event of a test trace, with what the model under test and the judge are shown."""

    trace: str = Field(description="The trace's file name without .json, e.g. code_11.")
    event_index: int = Field(description="0-based position of the event in its trace.")
    time: str = Field(description="observation.time: a Unix timestamp in seconds, as text.")
    event: str = Field(description="observation.event: what the user did, in one sentence.")
    observations_json: str = Field(
        description="The observations of the trace up to and including this event, as JSON "
                    "text with each object as the trace file holds it (the judge's view).")
    task_status: bool = Field(
        description="The trace's task_status (no upstream script reads it; probably whether "
                    "help was warranted).")
    splits: list[str] = Field(description="The splits of splits.json holding this trace.")


AgentStatus = Literal["ok", "error", "invalid_reply", "empty", "truncated", "blocked",
                      "not_imported", "refused"]


class AgentResponseRow(BaseModel):
    """The model under test's reply at one event."""

    trace: str = Field(description="Trace name.")
    event_index: int = Field(description="Event position in the trace.")
    sample_index: int = Field(description="Which rollout of the trace (0 unless sampling).")
    model: ModelUnderTest
    status: AgentStatus = Field(
        description="ok; error (the call failed after retries); invalid_reply (no reply was "
                    "the protocol's JSON, after the tries allowed); empty, truncated, blocked "
                    "(not answers; every one of these is a failed event, judged as upstream "
                    "judges one); not_imported (an imported model's published traces lack the "
                    "event: never judged).")
    message: NotOkReason
    response: str | None = Field(description="The reply as the model wrote it.")
    proposed_task: str | None = Field(
        description="The 'Proactive Task' of the reply; the JSON text of one that is not a "
                    "string; None when it proposes none.")
    proposal_json: str | None = Field(
        default=None,
        description="The 'Proactive Task' as JSON text, exactly the value the judge is shown "
                    "(a string, or false, a list, a number, which upstream passes on as they "
                    "are); None when the reply proposes none, or for a failed event.")
    judge_observations_json: str | None = Field(
        default=None,
        description="Imported published traces only: the observations 0..i of the published "
                    "trace file, as upstream's judge script sent them with this prediction "
                    "(earlier versions of the traces: their text may differ from the pinned "
                    "test data's); None: the test data's observations.")
    history_text: str | None = Field(
        description="The reply as it becomes the assistant turn of later events (upstream's "
                    "json.dumps of the parsed object); None for a failed event.")
    finish_reason: FinishReason
    prompt_tokens: PromptTokens
    completion_tokens: CompletionTokens
    latency_s: CallLatency
    attempts: int = Field(description="Calls made for this event, retries included.")
    request_key: RequestKey
    served_model: str | None = Field(default=None, description="The model the provider named.")
    system_fingerprint: SystemFingerprint = None
    litellm_version: LitellmVersion = None


VerdictStatus = Literal["scored", "judge_error", "generation_error", "invalid_reply",
                        "empty_response", "truncated_response", "blocked_response",
                        "not_imported", "refused"]


class VerdictRow(BaseModel):
    """The judge's verdict (accepted / rejected) on the agent's proposal at one event."""

    trace: str = Field(description="Trace name.")
    event_index: int = Field(description="Event position in the trace.")
    sample_index: int = Field(description="Which rollout of the trace.")
    splits: list[str] = Field(description="The splits holding the event's trace.")
    model: ModelUnderTest
    judge: str = Field(description="Judge (reward model or LLM).")
    status: VerdictStatus = Field(
        description="scored; judge_error; generation_error, invalid_reply, empty_response, "
                    "truncated_response, blocked_response (the agent's every attempt failed: "
                    "see judged_candidate_task); not_imported (no published prediction). Only "
                    "scored rows count in split_scores.csv; "
                    "metrics.csv also counts the failed events' verdicts, as upstream.")
    proposed: bool | None = Field(description="A task was proposed (else the proposal is null).")
    accepted: bool | None = Field(description="The judge accepted the proposal (or the null).")
    thought: str | None = Field(description="The judge's stated reasoning.")
    message: str | None = Field(description="Why the row is not scored.")
    judged_candidate_task: bool = Field(
        default=False,
        description="The agent's every attempt failed, so, as upstream, the judge was asked "
                    "about the literal proposal \"candidate_task\" (the test file's object "
                    "kept as the prediction); `proposed` and `accepted` are that verdict, "
                    "counted in metrics.csv, not in the strict split_scores.csv counts.")
    prompt_tokens: JudgePromptTokens
    completion_tokens: JudgeCompletionTokens
    latency_s: JudgeLatency
    attempts: int = Field(description="Judge calls made, retries included.")
    judge_prompt_sha256: JudgePromptSha
    request_key: JudgeRequestKey
    served_model: str | None = Field(default=None, description="The judge the provider named.")
    system_fingerprint: SystemFingerprint = None
    litellm_version: LitellmVersion = None


class SplitScoreRow(BaseModel):
    """Upstream's metrics for one split (pooled events of its traces), with the counts behind
    them and what was not scored."""

    model_config = ConfigDict(populate_by_name=True)

    model: ModelUnderTest
    judge: str = Field(description="Judge.")
    judge_prompt_sha256: JudgePromptSha
    split: str = Field(description="The split of splits.json (upstream's Category).")
    events: int = Field(description="Event rows pooled in the split (every sample): "
                                    "upstream's Total Events. An imported model's events "
                                    "without a published prediction are not among them "
                                    "(not_imported).")
    scored: int = Field(description="Events with a verdict: true + false positives/negatives.")
    failed_events: int = Field(
        default=0, description="Events whose every attempt failed (generation errors, invalid "
                               "replies, non-answers), left out of these counts; upstream "
                               "counts each as a proposal of \"candidate_task\".")
    failed_events_accepted: int = Field(
        default=0, description="Of those, how many the judge accepted (upstream's TP; the "
                               "others with a verdict its FP): metrics.csv adds them.")
    failed_events_rejected: int = Field(
        default=0, description="Of those, how many the judge rejected.")
    true_positive: int = Field(description="A task was proposed and accepted.")
    false_positive: int = Field(description="A task was proposed and rejected.")
    true_negative: int = Field(description="No task was proposed, and the judge agreed.")
    false_negative: int = Field(description="No task was proposed, and the judge wanted one.")
    recall: float = Field(description="TP / (TP + FN + 1e-8), as upstream.")
    precision: float = Field(description="TP / (TP + FP + 1e-8).")
    accuracy: float = Field(description="(TP + TN) / (TP + TN + FP + FN + 1e-8).")
    false_alarm: float = Field(description="FP / (TP + FP + 1e-8).")
    f1: float = Field(description="2PR / (P + R + 1e-8).")
    accept_rate: float = Field(description="Accepted proposals / proposals (= precision).")
    not_scored: int = Field(description="events - scored: every status below.")
    generation_errors: int = Field(description="The agent's call failed.")
    invalid_replies: int = Field(description="The agent's reply was not the protocol's JSON.")
    judge_errors: int = Field(description="The judge's call failed or its reply was invalid.")
    non_answers: int = Field(description="The agent's reply was empty, truncated or blocked.")
    not_imported: int = Field(
        default=0, description="An imported model's events that its published traces lack "
                               "(newer than them): never judged, in no other count.")
    refused: int = Field(
        default=0, description="The server refused the agent's or the judge's request as sent "
                               "(too long for its context, a parameter it does not take): not "
                               "asked again by a re-run unless --refresh.")
    f1_ci_low: float | None = Field(
        description="2.5th percentile of F1 over 1,000 resamplings of the split's traces (seed "
                    "0): events of one trace are not independent.")
    f1_ci_high: float | None = Field(description="97.5th percentile of the same.")
    accuracy_ci_low: float | None = Field(description="2.5th percentile of accuracy, likewise.")
    accuracy_ci_high: float | None = Field(description="97.5th percentile of accuracy.")
