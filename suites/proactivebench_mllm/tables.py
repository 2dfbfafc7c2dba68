"""The multimodal ProactiveBench's four tables: samples (one corpus entry each), steps (one row
per step of an episode: what it showed, the reply and how the environment read it), step
outcomes (each step scored by the package's rules, or an OEG answer by the judge) and the
scores per dataset."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..columns import FinishReason, ModelUnderTest

Mode = Literal["mcqa", "oeg"]
StepStatus = Literal["ok", "error", "empty", "truncated", "blocked", "image_error",
                     "environment_crash", "refused"]
OutcomeStatus = Literal["scored", "generation_error", "judge_error", "image_error",
                        "environment_crash", "refused"]
"""refused (steps and outcomes): the server refused the request as sent (too long for its
context, a parameter it does not take): never scored, not asked again by a re-run."""


class EntryRow(BaseModel):
    dataset: str = Field(description="Short dataset name (ROD, VSOD, MVP-N, IN-C, QD, CIT, "
                                     "COCO): the group scores aggregate by.")
    sample_id: int = Field(description="The entry's id (the key of the package's FILTER).")
    line: int = Field(description="Line of the corpus file the entry came from.")
    entry_json: str = Field(description="The entry as read (proactflow's Sample, as JSON): "
                                        "every step's view is computed from it and the replies.")
    corpus_revision: str = Field(description="The corpus the entry came from: finds the folder "
                                             "holding its images.")
    mode: Mode = Field(description="mcqa: multiple choice, step by step; oeg: one free answer.")
    hint: bool = Field(description="The dataset's hint appended to the question (OEG: the "
                                   "package's USE_HINTS help sentence).")
    reference: bool = Field(description="Reference mode: the unoccluded image, categories only.")
    answer: str = Field(description="The right category.")
    max_steps: int = Field(description="The environment's step limit.")
    oeg_answers: str | None = Field(description="OEG: the acceptable answers the judge is shown "
                                                "(the package's first call).")
    upstream_oeg_answers: str | None = Field(
        description="OEG: the answers the package parses against (its second call; differs "
                    "from the first for ChangeIt away from the video's ends).")
    prediction_thr: int | None = Field(description="OEG: how many leading verdicts are "
                                                   "proactive suggestions (PREDICTION_THR).")


class StepRow(BaseModel):
    dataset: str = Field(description="Short dataset name.")
    sample_id: int = Field(description="The entry's id.")
    step: int = Field(description="0 for the first view, then one per accepted action.")
    sample_index: int = Field(description="Which draw (always 0: the protocol is greedy).")
    model: ModelUnderTest
    status: StepStatus = Field(
        description="ok; error, empty, truncated or blocked (the call failed: never the model's "
                    "wrong answer; the episode stops there and the next run asks again); "
                    "image_error (the view has no pixels: the episode ends where it stands, as "
                    "upstream); environment_crash (the genuine package would fail an assertion "
                    "here).")
    message: str | None = Field(description="Why not ok.")
    image: str | None = Field(description="The image file shown, relative to the corpus.")
    image_sha256: str | None = Field(description="sha256 of the image bytes sent.")
    crop: list[float] | None = Field(description="The crop box (left, top, right, bottom) of "
                                                 "the image shown (COCO), None for the file.")
    options: list[str] = Field(description="The options shown: valid actions, then categories "
                                           "(OEG: none).")
    prompt: str | None = Field(description="The text sent with the image.")
    response: str | None = Field(description="The reply (visible content only: a reasoning "
                                             "model's hidden reasoning is not the reply).")
    action_evaluation: str | None = Field(description="The reply read against the valid "
                                                      "actions: correct, wrong or mismatch.")
    category_evaluation: str | None = Field(description="The reply read against the "
                                                        "categories: correct, wrong or mismatch.")
    final: bool = Field(description="The episode ends at this step.")
    stop_reason: str | None = Field(
        description="On the final step: correct, wrong, unreadable, max_steps, image_error "
                    "(MCQA), answered (OEG), or the failed call's status.")
    correct_prediction: bool | None = Field(description="On the final step (MCQA): the "
                                                        "episode ended on the right category.")
    num_turns: int | None = Field(description="On the final step (MCQA): replies the "
                                              "environment counted (upstream's num_turns).")
    finish_reason: FinishReason
    prompt_tokens: int | None = Field(description="Prompt tokens.")
    completion_tokens: int | None = Field(description="Completion tokens.")
    latency_s: float | None = Field(description="Call latency, seconds.")
    attempts: int = Field(description="Tries the call took (0 when cached or not asked).")
    request_key: str | None = Field(description="Per-call cache key.")


class OutcomeRow(BaseModel):
    dataset: str = Field(description="Short dataset name.")
    sample_id: int = Field(description="The entry's id.")
    step: int = Field(description="The step.")
    sample_index: int = Field(description="Which draw.")
    model: ModelUnderTest
    judge: str = Field(description="The OEG judge, or 'rules' (MCQA: the package's rules).")
    mode: Mode = Field(description="mcqa or oeg.")
    hint: bool = Field(description="Hint variant.")
    reference: bool = Field(description="Reference variant.")
    final: bool = Field(description="The episode ends at this step: the row its sample's "
                                    "scores come from.")
    status: OutcomeStatus = Field(
        description="scored; generation_error (the call failed); judge_error (OEG: the judge "
                    "call failed, or its reply holds no 0/1 list of the right length); "
                    "image_error (scored as upstream: not correct); environment_crash (not "
                    "scored: the package itself cannot run this sample).")
    message: str | None = Field(description="Why not scored.")
    stop_reason: str | None = Field(description="As in the steps table.")
    correct_prediction: bool | None = Field(description="MCQA: the right category at the end.")
    num_turns: int | None = Field(description="MCQA: upstream's num_turns.")
    ps: int | None = Field(description="OEG: 1 if the judge found an acceptable proactive "
                                       "suggestion.")
    cp: int | None = Field(description="OEG: 1 if the judge found the right category.")
    agg: int | None = Field(description="OEG: ps or cp.")
    upstream_ps: int | None = Field(description="OEG: the package's own ps for the same reply "
                                                "(parsed against its second call's answers; "
                                                "a judge_error scores 0).")
    upstream_cp: int | None = Field(description="OEG: the package's own cp.")
    upstream_agg: int | None = Field(description="OEG: the package's own aggregate.")
    judge_output: str | None = Field(description="OEG: the judge's reply after its thinking.")
    prompt_tokens: int | None = Field(description="OEG: the judge's prompt tokens (records.py sums them).")
    completion_tokens: int | None = Field(description="OEG: the judge's completion "
                                                            "tokens.")


class DatasetScoreRow(BaseModel):
    model: ModelUnderTest
    judge: str = Field(description="The OEG judge, or 'rules'.")
    mode: Mode = Field(description="mcqa or oeg.")
    hint: bool = Field(description="Hint variant.")
    reference: bool = Field(description="Reference variant.")
    dataset: str = Field(description="Short dataset name, or 'all' (every sample pooled).")
    samples: int = Field(description="Samples selected.")
    scored: int = Field(description="Samples with a score (the denominators below).")
    acc: float | None = Field(description="MCQA: 100 × share of scored samples ending on the "
                                          "right category (unrounded).")
    ps: float | None = Field(description="MCQA: mean proactive steps (num_turns − 1); OEG: 100 × "
                                         "share of judged answers with a proactive suggestion.")
    cp: float | None = Field(description="OEG: 100 × share with the right category.")
    agg: float | None = Field(description="OEG: 100 × share with either.")
    upstream_ps: float | None = Field(description="OEG: the package's figure, over every "
                                                  "sample, judge errors as 0.")
    upstream_cp: float | None = Field(description="OEG: the package's cp figure.")
    upstream_agg: float | None = Field(description="OEG: the package's aggregate figure.")
    generation_errors: int = Field(description="Samples whose episode stopped on a failed call.")
    judge_errors: int = Field(description="OEG: judge calls failed or unreadable replies.")
    image_errors: int = Field(description="Episodes ended on a view with no pixels (scored as "
                                          "not correct, as upstream).")
    environment_crashes: int = Field(description="Samples the package itself cannot run (not "
                                                 "scored).")
    refused: int = Field(default=0, description="Samples whose episode stopped on a request "
                                                "the server refused as sent (not retried).")
