"""The four tables of the video ProactiveBench: samples (a question about a video), steps (the
model's output at each 1-s step of the video), gold turns (each judged with the replies in its
window, with its PAUC) and per-part scores.

Every sample has a row in the steps table even when its video cannot be decoded (one error row
for step 0), and every gold turn has a row in the turns table: a turn whose replies could not be
judged, or whose episode failed, carries its status instead of disappearing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..columns import (CallLatency, CompletionTokens, FinishReason, JudgePromptSha, ModelUnderTest,
                      NotOkReason, PromptTokens, RequestKey)


class VideoSampleRow(BaseModel):
    """One sample of a part's anno.json, with its video located and hashed."""

    part: str = Field(description="WEB, EGO, TV or VAD.")
    question_id: str = Field(description="The sample's id in its part (TV's end in %Q<n>).")
    index: int = Field(description="0-based position in its part's anno.json.")
    video: str = Field(description="The video's file name as anno.json names it.")
    video_file: str = Field(description="Where the video is, relative to the corpus folder.")
    video_sha256: str = Field(description="sha256 of the video file: the frames' key.")
    question: str = Field(description="The question, asked at time 0.")
    duration: float = Field(description="The video's duration in seconds (anno.json's).")
    steps: int = Field(description="Steps of the episode under the run's streaming settings.")
    user_turns_json: str = Field(description="Later user turns (TV's subtitles) as JSON "
                                             "[{content, time}].")
    answers_json: str = Field(description="The gold turns as JSON [{content, related_start, "
                                          "related_end, reply_start, reply_end}].")
    extras_json: str = Field(description="anno.json's other keys of the sample, as JSON text.")


StepStatus = Literal["ok", "error", "empty", "truncated", "blocked", "refused"]
"""refused: the server refused the step's request as sent (e.g. too long for its context): a
step without an answer, like empty, truncated and blocked; not asked again by a re-run."""


class StepRow(BaseModel):
    """The model's output at one step of a sample's episode."""

    part: str = Field(description="The sample's part.")
    question_id: str = Field(description="The sample's id.")
    step: int = Field(description="The step r, covering [r, r+1) s of the video.")
    sample_index: int = Field(description="Which rollout of the episode (0 unless sampling).")
    model: ModelUnderTest
    status: StepStatus = Field(description=(
        "ok; error (the call failed, or the video could not be decoded: then the episode "
        "stops); empty, truncated, blocked (not answers: the episode stops)."))
    message: NotOkReason
    response: str | None = Field(description="The output as the model wrote it.")
    silent: bool | None = Field(description="True when the output is the silence marker.")
    reply_time: float = Field(description="When a reply of this step counts as said: the "
                                          "step's end, in seconds.")
    frame_times: list[float] = Field(description="The decoded time of each frame this step "
                                                 "brought (empty when nothing was decoded).")
    images_sent: int = Field(description="Images the step's request carried (the window).")
    subtitles: list[str] = Field(description="The user turns (TV's subtitles) this step "
                                             "brought, in order.")
    finish_reason: FinishReason
    prompt_tokens: PromptTokens
    completion_tokens: CompletionTokens
    latency_s: CallLatency
    attempts: int = Field(description="Calls made for this step, retries included.")
    request_key: RequestKey


TurnStatusName = Literal["scored", "judge_error", "generation_error", "error", "refused"]


class TurnRow(BaseModel):
    """A gold turn of a sample, judged with every distinct reply in its window."""

    part: str = Field(description="The sample's part.")
    question_id: str = Field(description="The sample's id.")
    turn: int = Field(description="0-based position of the gold turn in the sample's answer.")
    sample_index: int = Field(description="Which rollout of the episode.")
    model: ModelUnderTest
    judge: str = Field(description="The judge.")
    judge_prompt_sha256: JudgePromptSha
    status: TurnStatusName = Field(description=(
        "scored; judge_error (a judge call failed or its reply never started with 1, 2 or 3); "
        "generation_error (the episode stopped before its end); error (the video could not be "
        "decoded); refused (the server refused a judge request as sent: not asked again). "
        "Only scored turns enter PAUC; the others are counted."))
    message: str | None = Field(description="Why the turn is not scored.")
    reply_start: float = Field(description="The reply window's start (s).")
    reply_end: float = Field(description="The reply window's end (s, inclusive).")
    related_end: float = Field(description="The evidence's end (s): the late-lower rule's bar.")
    replies: list[str] = Field(description="The distinct in-window replies judged, in order.")
    reply_times: list[float] = Field(description="When each was said (s).")
    judge_scores: list[int | None] = Field(description="The judge's score (1-3) of each call, "
                                                       "in order; None where unreadable.")
    judged: int = Field(description="Judge calls made for the turn.")
    late_lower_deleted: int = Field(description="Scores deleted by the late-lower rule.")
    final_score: int | None = Field(description="The time-agnostic view: the last kept score "
                                                "(1-3); None without a judged reply.")
    pauc_0: float | None = Field(description="The turn's PAUC at omega 0 (timing counts "
                                             "fully), in [0, 1].")
    pauc_05: float | None = Field(alias="pauc_0.5", description="The turn's PAUC at omega 0.5.")
    pauc_1: float | None = Field(description="The turn's PAUC at omega 1 (timing ignored).")
    prompt_tokens: int | None = Field(description="Prompt tokens of the turn's judge calls.")
    completion_tokens: int | None = Field(description="Completion tokens of its judge calls.")

    model_config = {"populate_by_name": True}


class PartScoreRow(BaseModel):
    """PAUC of one part (or all parts) for one (model, judge)."""

    model: ModelUnderTest
    judge: str = Field(description="The judge.")
    part: str = Field(description="WEB, EGO, TV, VAD, or all (every turn of the run).")
    turns: int = Field(description="Scored gold turns: the mean's denominator.")
    pauc_0: float | None = Field(description="PAUC x 100 at omega 0 (turn-weighted mean).")
    pauc_05: float | None = Field(alias="pauc_0.5", description="PAUC x 100 at omega 0.5.")
    pauc_1: float | None = Field(description="PAUC x 100 at omega 1.")
    judge_errors: int = Field(description="Turns lost to the judge.")
    generation_errors: int = Field(description="Turns lost to a failed episode.")
    errors: int = Field(description="Turns lost to an undecodable video.")
    refused: int = Field(default=0, description="Turns whose judge request the server refused "
                                                "as sent (not asked again by a re-run).")
    pauc_0_ci_low: float | None = Field(description="95 % bootstrap interval of pauc_0, "
                                                    "resampling samples: low.")
    pauc_0_ci_high: float | None = Field(description="... high.")
    pauc_05_ci_low: float | None = Field(alias="pauc_0.5_ci_low",
                                         description="Interval of pauc_0.5: low.")
    pauc_05_ci_high: float | None = Field(alias="pauc_0.5_ci_high", description="... high.")
    pauc_1_ci_low: float | None = Field(description="Interval of pauc_1: low.")
    pauc_1_ci_high: float | None = Field(description="... high.")
    answered: int = Field(description="Time-agnostic view: scored turns with a judged reply.")
    final_score_mean: float | None = Field(description="Their mean final score (1-3).")
    final_3: int = Field(description="Turns whose final score is 3.")
    final_2: int = Field(description="... 2.")
    final_1: int = Field(description="... 1.")

    model_config = {"populate_by_name": True}
