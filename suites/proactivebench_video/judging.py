"""Judging per gold turn: once a sample's episode has ended, each gold turn gets one judge call
per distinct reply in its window, each with the replies so far (pauc.judge_plan); the turn's
row holds the judge's scores and the turn's PAUC at every omega (pauc.score_turn).

An episode that stopped early (a failed call, a reply that is not an answer) has no complete
replies to judge: its turns are generation_error rows; an undecodable video's are error rows.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ...config.settings import ModelRole
from ...providers.chat import ChatOutcome, ChatRequest
from ...providers.prompt_cache import CacheHint
from ..base import Prompts
from .episode import sample_of
from .pauc import (OMEGAS, JudgeRequest, UnreadableScore, in_window, judge_plan, omega_column,
                   parse_judge_score, score_turn)
from .prompts import JUDGE
from .protocol import StreamingSettings, replies
from .tables import TurnRow


def _plans(sample: dict[str, Any], steps: list[dict[str, Any]],
           settings: StreamingSettings) -> list[list[JudgeRequest]] | None:
    """Each gold turn's judge plan, or None when the episode did not run to its end."""
    if len(steps) < sample["steps"] or any(step["status"] == "error" for step in steps):
        return None
    video = sample_of(sample)
    said = replies([step["response"] if step["status"] == "ok" else settings.silence_marker
                    for step in steps], settings)  # a reply that is not an answer: none
    return [judge_plan(video.question, turn.content, said, turn.reply_start, turn.reply_end)
            for turn in video.answers]


def judge_requests(sample: dict[str, Any], steps: list[dict[str, Any]], role: ModelRole | None,
                   prompts: Prompts, settings: StreamingSettings) -> list[ChatRequest]:
    plans = _plans(sample, steps, settings)
    if plans is None or role is None:
        return []
    return [ChatRequest.build(role, [("system", prompts[JUDGE].text),
                                     ("user", request.user_message)],
                              sample_index=steps[0]["sample_index"],
                              cache=CacheHint(f"judge:{prompts[JUDGE].sha256[:16]}"))
            for plan in plans for request in plan]


def _failure(steps: list[dict[str, Any]]) -> tuple[str, str]:
    failed = next((step for step in steps if step["status"] == "error"), None)
    if failed is None:
        return "generation_error", "the episode ended before its last step"
    if failed["status"] == "error" and failed["request_key"] is None:
        return "error", failed["message"] or "the video cannot be decoded"
    return "generation_error", (f"step {failed['step']}: {failed['status']}: "
                                f"{failed['message'] or ''}").rstrip(": ")


def judgment_rows(sample: dict[str, Any], steps: list[dict[str, Any]],
                  outcomes: list[ChatOutcome], role: ModelRole | None, prompts: Prompts,
                  settings: StreamingSettings) -> list[BaseModel]:
    video = sample_of(sample)
    plans = _plans(sample, steps, settings)
    said = replies([step["response"] or "" for step in steps], settings)
    rows: list[BaseModel] = []
    position = 0
    for number, turn in enumerate(video.answers):
        common: dict[str, Any] = dict(
            part=sample["part"], question_id=sample["question_id"], turn=number,
            sample_index=steps[0]["sample_index"], model=steps[0]["model"],
            judge=role.model if role else "-", judge_prompt_sha256=prompts[JUDGE].sha256,
            reply_start=turn.reply_start, reply_end=turn.reply_end,
            related_end=turn.related_end)
        if plans is None:
            status, message = _failure(steps)
            rows.append(TurnRow.model_validate({
                **common, "status": status, "message": message, "replies": [],
                "reply_times": [], "judge_scores": [], "judged": 0, "late_lower_deleted": 0,
                "final_score": None, **_paucs(None), "prompt_tokens": None,
                "completion_tokens": None}))
            continue
        plan = plans[number]
        kept = in_window(said, turn.reply_start, turn.reply_end)  # what the plan judges
        mine = outcomes[position:position + len(plan)]
        position += len(plan)
        texts = [outcome.content or "" for outcome in mine]
        scores = [_score(text) for text in texts]
        failed = next((outcome for outcome in mine if not outcome.ok), None)
        score = score_turn([(request.time, text) for request, text in zip(plan, texts)],
                           turn.reply_start, turn.reply_end, turn.related_end)
        status = score.status if failed is None else \
            "refused" if failed.status == "refused" else "judge_error"
        scored = status == "scored"
        why = None if scored else (
            failed.error if failed is not None else "a judge reply does not start with 1, 2 "
                                                    "or 3")
        rows.append(TurnRow.model_validate({
            **common, "status": status, "message": why,
            "replies": [reply.text for reply in kept],
            "reply_times": [reply.time for reply in kept], "judge_scores": scores,
            "judged": len(plan), "late_lower_deleted": score.late_lower_deleted,
            "final_score": score.final_score if scored else None,
            **_paucs(score.pauc if scored else None),
            "prompt_tokens": _total(outcome.prompt_tokens for outcome in mine),
            "completion_tokens": _total(outcome.completion_tokens for outcome in mine)}))
    return rows


def _paucs(pauc: dict[float, float] | None) -> dict[str, float | None]:
    """The turn's PAUC columns (pauc_0, pauc_0.5, pauc_1); None when it is not scored."""
    return {omega_column(omega): pauc[omega] if pauc is not None else None
            for omega in OMEGAS}


def _score(text: str) -> int | None:
    try:
        return parse_judge_score(text)
    except UnreadableScore:
        return None


def _total(values: Any) -> int | None:
    present = [value for value in values if value is not None]
    return sum(present) if present else None
