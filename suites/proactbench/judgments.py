"""judgments: the judge's verdict on every regenerated response (PROTOCOL.md steps 3-4)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import ValidationError

from ...providers.prompt_cache import CacheHint
from ...providers.chat import ChatOutcome, ChatRequest
from .corpus import Rubric
from .judge import EvaluationResult, JudgeReply
from .tables import NON_ANSWER_STATUSES, JudgmentRow
from ...config.settings import ModelRole
from ..sources import Prompt

STAGE = "judgments"
VERSION = 2

EMPTY_HISTORY = "(empty \u2014 this is the first turn)"
_SPEAKER = {"user": "[User]", "assistant": "[Assistant]"}
_RESPONSE_FORMATS: dict[str, Any] = {
    "json_schema": {"type": "json_schema", "json_schema": {
        "name": "judge_reply", "schema": JudgeReply.model_json_schema(), "strict": False}},
    "json_object": {"type": "json_object"},
    "none": None,
}
RESPONSE_FORMATS = tuple(_RESPONSE_FORMATS)


def judge_user_message(turn: int, rubric: Rubric, history: list[tuple[str, str]]) -> str:
    """The single user message the judge sees, byte for byte as PROTOCOL.md step 3 defines it."""
    trigger_block = (
        "[TRIGGER POINT ACTIVE \u2014 Score the Assistant's LAST response]\n"
        f"This trigger was declared for turn {turn}.\n"
        "Evaluation Rubric:\n"
        f"{rubric.model_dump_json(indent=2)}"
    )
    rendered = "\n\n".join(f"{_SPEAKER[role]}: {content}" for role, content in history)
    history_block = f"Dialogue History:\n{rendered or EMPTY_HISTORY}"
    closing_block = ("--- END OF CONTEXT ---\n"
                     "Now respond with the JSON object containing only the evaluation_result.")
    return "\n\n".join([trigger_block, history_block, closing_block])


def judge_request(trigger: dict[str, Any], response: str, role: ModelRole, prompt: Prompt,
                  response_format: str = "json_schema", sample_index: int = 0) -> ChatRequest:
    history = [(m["role"], m["content"]) for m in trigger["context"]]
    history.append(("assistant", response))
    rubric = Rubric.model_validate(trigger["rubric"])
    messages = [("system", prompt.text),
                ("user", judge_user_message(trigger["turn"], rubric, history))]
    fmt = _RESPONSE_FORMATS[response_format]
    # Every call on this template sends its system prompt first: the prompt cache's prefix;
    # the calls on one trigger (its samples) send its rubric and dialogue next, up to the
    # reply judged: a longer one.
    on_trigger = hashlib.sha256(f"{trigger['turn']}\n{rubric.model_dump_json()}".encode()
                                ).hexdigest()[:16]
    return ChatRequest.build(role, messages, sample_index=sample_index,
                             extra={"response_format": fmt} if fmt else None,
                             cache=CacheHint(f"judge:{prompt.sha256[:16]}",
                                             subgroup=on_trigger))


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)
_THINK_END = "</think>"


def parse_judge_reply(text: str) -> EvaluationResult:
    """The verdict in a judge reply; ValueError when the reply is not a valid verdict.

    Reasoning a model writes before its answer (`<think>...</think>`, or only the closing tag when
    the chat template opened it) is not part of the verdict: only what follows the last
    `</think>` is read.
    """
    if _THINK_END in text:
        text = text.rsplit(_THINK_END, 1)[1]
    body = _FENCE.sub("", text.strip())
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"no JSON object in reply: {text[:120]!r}")
    try:
        data = json.loads(body[start:end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"malformed JSON ({exc.msg})") from None
    if isinstance(data, dict) and "evaluation_result" not in data and "status" in data:
        data = {"evaluation_result": data}
    try:
        return JudgeReply.model_validate(data).evaluation_result
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise ValueError(f"{where}: {error['msg']}") from None


_QUOTES = "\"'\u201c\u201d\u2018\u2019"


def _normalise(text: str) -> str:
    return " ".join(text.split())


def evidence_is_verbatim(evidence: str, response: str) -> bool:
    """Whether the judge's evidence occurs in the response, whitespace-normalised, ignoring one
    pair of enclosing quotes."""
    quote = _normalise(evidence).strip(_QUOTES).strip()
    return bool(quote) and quote in _normalise(response)


def _row(response: dict[str, Any], role: ModelRole, prompt: Prompt,
         **fields: Any) -> JudgmentRow:
    base = dict(unique_id_eval=response["unique_id_eval"], turn=response["turn"],
                phase=response["phase"], sample_index=response["sample_index"],
                model=response["model"], judge=role.model, score=None, rationale=None,
                evidence=None, evidence_verbatim=None, message=None, prompt_tokens=None,
                completion_tokens=None, latency_s=None, attempts=0,
                judge_prompt_sha256=prompt.sha256, request_key=None)
    base.update(fields)
    return JudgmentRow(**base)


def judgment_row(response: dict[str, Any], outcome: ChatOutcome | None, role: ModelRole,
                 prompt: Prompt) -> JudgmentRow:
    """The verdict on one response. Without an outcome the response was not judged: it carries
    its own status (unevaluable, a non-answer, a failed generation) so aggregation counts it."""
    if outcome is None:
        status = {"unevaluable": "unevaluable", **NON_ANSWER_STATUSES}.get(
            response["status"], "generation_error")
        return _row(response, role, prompt, status=status, message=response["message"])
    common = dict(prompt_tokens=outcome.prompt_tokens,
                  completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
                  cache_read_tokens=outcome.cache_read_tokens,
                  cache_write_tokens=outcome.cache_write_tokens,
                  attempts=outcome.attempts, request_key=outcome.request_key,
                  served_model=outcome.served_model,
                  system_fingerprint=outcome.system_fingerprint,
                  litellm_version=outcome.litellm_version)
    if outcome.final:
        return _row(response, role, prompt, status="refused",
                    message=f"judge: {outcome.error}", **common)
    if not outcome.ok:
        return _row(response, role, prompt, status="judge_error", message=outcome.error,
                    **common)
    verdict: EvaluationResult = outcome.parsed
    scored = verdict.status == "EVALUATED"
    return _row(response, role, prompt,
                status="scored" if scored else "skipped",
                score=verdict.score if scored else None,
                rationale=verdict.rationale, evidence=verdict.evidence,
                evidence_verbatim=evidence_is_verbatim(verdict.evidence, response["response"]),
                message=None if scored else "the judge answered SKIPPED", **common)
