"""judgments: the judge's verdict on every regenerated response (PROTOCOL.md steps 3-4)."""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import polars as pl
from pydantic import ValidationError

from ...llm import ChatClient, ChatRequest
from ...pools import run_pool
from ...schemas.arrow import to_frame
from .corpus import Rubric
from .judge import EvaluationResult, JudgeReply
from .tables import NON_ANSWER_STATUSES, JudgmentRow
from ...settings import ModelRole
from ...sources import JudgePrompt
from ...streaming import RowStream

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


def judge_request(trigger: dict[str, Any], response: str, role: ModelRole, prompt: JudgePrompt,
                  response_format: str = "json_schema", sample_index: int = 0) -> ChatRequest:
    history = [(m["role"], m["content"]) for m in trigger["context"]]
    history.append(("assistant", response))
    rubric = Rubric.model_validate(trigger["rubric"])
    messages = [("system", prompt.text),
                ("user", judge_user_message(trigger["turn"], rubric, history))]
    fmt = _RESPONSE_FORMATS[response_format]
    return ChatRequest.build(role, messages, sample_index=sample_index,
                             extra={"response_format": fmt} if fmt else None)


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


def _row(response: dict[str, Any], role: ModelRole, prompt: JudgePrompt,
         **fields: Any) -> JudgmentRow:
    base = dict(unique_id_eval=response["unique_id_eval"], turn=response["turn"],
                phase=response["phase"], sample_index=response["sample_index"],
                model=response["model"], judge=role.model, score=None, rationale=None,
                evidence=None, evidence_verbatim=None, message=None, prompt_tokens=None,
                completion_tokens=None, latency_s=None, attempts=0,
                judge_prompt_sha256=prompt.sha256, request_key=None)
    base.update(fields)
    return JudgmentRow(**base)


async def judge_responses(triggers: pl.DataFrame, responses: pl.DataFrame | RowStream,
                          role: ModelRole, prompt: JudgePrompt, client: ChatClient, *,
                          response_format: str = "json_schema", concurrency: int = 16,
                          on_row: Callable[[JudgmentRow], None] | None = None) -> pl.DataFrame:
    """One JudgmentRow per response row. Only responses with status ok are sent to the judge;
    the others carry their status through so that aggregation counts them.

    `responses` is the responses table, or a RowStream of its rows while the responses stage is
    still running: judging then starts with the first response.
    """
    stream = responses if isinstance(responses, RowStream) else RowStream.of(responses.to_dicts())
    position = {key: index for index, key in
                enumerate(zip(triggers["unique_id_eval"], triggers["turn"]))}
    needed = triggers.select("context", "rubric")

    async def judge(response: dict[str, Any]) -> JudgmentRow:
        if response["status"] != "ok":
            status = {"unevaluable": "unevaluable", **NON_ANSWER_STATUSES}.get(
                response["status"], "generation_error")
            return _row(response, role, prompt, status=status, message=response["message"])
        trigger = needed.row(position[(response["unique_id_eval"], response["turn"])],
                             named=True)
        request = judge_request({**response, **trigger}, response["response"], role, prompt,
                                response_format, response["sample_index"])
        outcome = await client.call(request, accept=parse_judge_reply)
        common = dict(prompt_tokens=outcome.prompt_tokens,
                      completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
                      attempts=outcome.attempts, request_key=outcome.request_key,
                      served_model=outcome.served_model,
                      system_fingerprint=outcome.system_fingerprint,
                      litellm_version=outcome.litellm_version)
        if not outcome.ok:
            return _row(response, role, prompt, status="judge_error", message=outcome.error,
                        **common)
        verdict: EvaluationResult = outcome.parsed
        scored = verdict.status == "EVALUATED"
        return _row(response, role, prompt,
                    status="scored" if scored else "skipped",
                    score=verdict.score if scored else None,
                    rationale=verdict.rationale, evidence=verdict.evidence,
                    evidence_verbatim=evidence_is_verbatim(verdict.evidence,
                                                           response["response"]),
                    message=None if scored else "the judge answered SKIPPED", **common)

    judged = await run_pool(stream.get, judge, concurrency, on_row)
    return to_frame(judged, JudgmentRow).sort("unique_id_eval", "turn", "sample_index")
