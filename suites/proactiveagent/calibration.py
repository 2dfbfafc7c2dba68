"""Judge calibration on ProactiveBench's human-labelled reward test set, as a suite of its own.

Its samples are the labelled examples (observations so far and a proposed task, or none); the
"model under test" is the test set itself: each proposal is read from the data, no call is made;
the candidate judge is prompted exactly as in a ProactiveBench run (same prompts, same message)
and its reply read as upstream's reward-model scoring script reads it (`json.loads`, else the
`"judgement": "accepted|rejected"` expression anywhere in the text; a reply without a verdict
is not asked again, it has none); the scores are the authors' reward-model table: agreement
with the human label per category and overall, accuracy, precision, recall and F1 of
"accepted". Being a suite, it is cached like everything else: a second judge costs only its own
calls, and the same judge again costs nothing.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import polars as pl
import pyarrow as pa
from pydantic import BaseModel, Field

from ...cache.artifacts import ArtifactStore, write_atomic
from ...cache.keys import text_sha256
from ...providers.chat import ChatOutcome, ChatRequest, RetryPlan
from ...common.errors import UserError
from ...schemas.arrow import arrow_schema, frame_of, to_frame
from ...config.settings import ModelRole, RunSettings
from ..base import DataSource, Prompts, StageNames, Step, Suite, Tables, percent
from . import upstream
from .calibration_names import CALIBRATION, LABELLED
from .data import RewardTestRow, read_reward_test_set
from .metrics import CATEGORIES, CalibrationRow, calibration
from .protocol import read_calibration_verdict
from .rules import JUDGE_INSTRUCTION, JUDGE_SYSTEM
from .suite import ProactiveAgent

_RUN = ProactiveAgent(prompts_needed=(JUDGE_SYSTEM, JUDGE_INSTRUCTION))

ALL = "ALL"


class Example(BaseModel):
    """One labelled example of the reward test set."""

    index: int = Field(description="0-based line of the example in the file.")
    observations_json: str = Field(description="`obs` as the file holds it, as JSON text.")
    pred_task: str | None = Field(description="The proposed task; None for none.")
    valid: bool = Field(description="The human label: the proposal (or its absence) is right.")
    annotation: list[bool] = Field(description="Each annotator's verdict.")
    help_needed: bool = Field(description="Whether the user needed help.")
    category: str = Field(description="Missed-Need, Correct-Rejection, Correct-Detection or "
                                      "False-Alarm, as the file spells it.")


class Proposal(BaseModel):
    """The proposal of one example, read from the data (no call)."""

    index: int = Field(description="The example.")
    sample_index: int = Field(description="Always 0: the data has one proposal.")
    model: str = Field(description=f"'{LABELLED}'.")
    status: str = Field(description="ok.")
    message: str | None = Field(description="Unused (None).")
    proposed_task: str | None = Field(description="The proposal judged.")
    proposal_json: str | None = Field(description="The proposal as JSON text; None for none.")
    prompt_tokens: int | None = Field(description="None: no call.")
    completion_tokens: int | None = Field(description="None: no call.")


class CalibrationVerdict(BaseModel):
    """The candidate judge's verdict on one example, beside the human label."""

    index: int = Field(description="The example.")
    sample_index: int = Field(description="Always 0.")
    model: str = Field(description=f"'{LABELLED}'.")
    judge: str = Field(description="The candidate judge.")
    category: str = Field(description="The example's category.")
    valid: bool = Field(description="The human label.")
    status: str = Field(description="scored; no_verdict (the reply holds none as upstream's "
                                    "scoring script reads it: never asked again); judge_error "
                                    "(the call failed).")
    accepted: bool | None = Field(description="The judge accepted (None: no verdict).")
    thought: str | None = Field(description="The judge's stated reasoning.")
    message: str | None = Field(description="Why there is no verdict.")
    prompt_tokens: int | None = Field(description="Judge prompt tokens.")
    completion_tokens: int | None = Field(description="Judge completion tokens.")
    latency_s: float | None = Field(description="Wall time of the judge call.")
    attempts: int = Field(description="Judge calls made, retries included.")
    judge_prompt_sha256: str = Field(description="sha256 of the judge's system prompt.")
    request_key: str | None = Field(description="Key of the judge call in the per-call cache.")


class CalibrationScore(BaseModel):
    """The authors' reward-model table for one judge: one row per category and ALL."""

    judge: str = Field(description="The candidate judge.")
    judge_prompt_sha256: str = Field(description="sha256 of its system prompt.")
    category: str = Field(description="A category of the test set, or ALL.")
    examples: int = Field(description="Examples in the category.")
    agreement: float | None = Field(description="Share whose verdict equals the human label "
                                                "(a missing verdict never agrees).")
    accuracy: float | None = Field(description="ALL only: (TP + TN) / examples.")
    precision: float | None = Field(description="ALL only: TP / (TP + FP), accepted positive.")
    recall: float | None = Field(description="ALL only: TP / (TP + FN).")
    f1: float | None = Field(description="ALL only: 2TP / (2TP + FP + FN).")
    no_verdict: int = Field(description="Replies without a verdict (never agreeing, counted as "
                                        "rejections, as upstream's script counts them).")
    judge_errors: int = Field(default=0, description="Calls that failed (no reply): without a "
                                                     "verdict too, counted likewise.")


def _thought(text: str) -> str | None:
    """The judge's stated reasoning, when its reply is a JSON object holding one."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    thought = value.get("thought") if isinstance(value, dict) else None
    return thought if isinstance(thought, str) else None


class JudgeCalibration(Suite):
    """The judge is prompted, called and read exactly as in a ProactiveBench run: those steps are
    the ProactiveAgent suite's own."""

    name = CALIBRATION
    asks_model = False
    display_name = "ProactiveBench (Proactive Agent): judge calibration"
    title = ("ProactiveBench judge calibration: a candidate judge against the human-labelled "
             "reward test set (the authors' reward-model table)")
    group_column = "category"
    sample_noun = "examples"
    sample_key = ("index",)
    # Version 2: replies read as upstream's scoring script reads them, no_verdict apart.
    stages = StageNames(samples="calibration_examples", responses="calibration_proposals",
                        judgments="calibration_verdicts", scores="calibration_scores",
                        versions={"calibration_proposals": 2, "calibration_verdicts": 2,
                                  "calibration_scores": 2})
    takes_judge_response_format = False
    tables = Tables(samples=Example, responses=Proposal, judgments=CalibrationVerdict,
                    scores=CalibrationScore)
    error_statuses = ("judge_error",)
    main_output = "calibration.csv"

    def locate(self, settings: RunSettings, store: ArtifactStore) -> DataSource:
        path = settings.corpus.path
        if path:
            rows = read_reward_test_set(path)
            digest = text_sha256(json.dumps([row.model_dump() for row in rows]))
            return DataSource(f"sha256:{digest}", path, rows)
        return DataSource(upstream.UPSTREAM_COMMIT, f"{upstream.UPSTREAM_REPO}@"
                          f"{upstream.UPSTREAM_COMMIT[:12]}:{upstream.REWARD_TEST_PATH}",
                          upstream.load_upstream_reward_test_set(store))

    def samples_key_settings(self, settings: RunSettings, source: DataSource) -> dict[str, Any]:
        return {"suite": self.name, "corpus_revision": source.revision,
                "limit": settings.corpus.limit}

    def build_samples(self, settings: RunSettings, source: DataSource) -> pl.DataFrame:
        rows: list[RewardTestRow] = source.location
        if settings.corpus.limit:
            rows = rows[:settings.corpus.limit]
        return to_frame([Example(**{**row.model_dump(), "annotation": list(row.annotation)})
                         for row in rows], Example)

    def check_settings(self, settings: RunSettings) -> None:
        if settings.judge is None:
            raise UserError("calibration needs the candidate judge: --judge-model")

    def plan_summary(self, samples: pl.DataFrame) -> str:
        return f"{samples.height} labelled examples"

    def generation_defaults(self, role: str, reasoning: bool) -> dict[str, Any]:
        return _RUN.generation_defaults(role, reasoning)

    def generation_request(self, sample: dict[str, Any], earlier: list[Step],
                           role: ModelRole, prompts: Prompts, sample_index: int
                           ) -> ChatRequest | None:
        return None  # the proposal is in the data

    def response_row(self, sample: dict[str, Any], outcome: ChatOutcome | None,
                     role: ModelRole, sample_index: int) -> Proposal:
        return Proposal(index=sample["index"], sample_index=sample_index, model=LABELLED,
                        status="ok", message=None, proposed_task=sample["pred_task"],
                        proposal_json=None if sample["pred_task"] is None
                        else json.dumps(sample["pred_task"], ensure_ascii=False),
                        prompt_tokens=None, completion_tokens=None)

    def judge_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        return _RUN.judge_prompts(settings, store)

    def judgment_request(self, sample: dict[str, Any], response: dict[str, Any],
                         role: ModelRole | None, prompts: Prompts, settings: RunSettings
                         ) -> ChatRequest | None:
        request = _RUN.judgment_request(sample, response, role, prompts, settings)
        # Upstream's scoring script calls once and reads whatever came back: no second try.
        return None if request is None else replace(
            request, retry=RetryPlan(attempts=1, keep_non_answers=True))

    def accept_judge_reply(self, text: str) -> bool | None:
        """Never refuses a reply: one without a verdict is not asked again upstream."""
        return read_calibration_verdict(text)

    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> CalibrationVerdict:
        assert outcome is not None and role is not None, "every proposal is judged"
        # A reply, even an empty or cut-off one, is read as upstream reads it; only a call
        # that failed (no reply at all) is a judge_error.
        answered = outcome.status != "error"
        accepted = (outcome.parsed if outcome.ok else read_calibration_verdict(
            outcome.content or "")) if answered else None
        status = "judge_error" if not answered else "scored" if accepted is not None \
            else "no_verdict"
        return CalibrationVerdict(
            index=sample["index"], sample_index=response["sample_index"], model=LABELLED,
            judge=role.model, category=sample["category"], valid=sample["valid"],
            status=status, accepted=accepted, thought=_thought(outcome.content or ""),
            message=outcome.error if not answered else None if accepted is not None else
            "no verdict: the reply holds no \"judgement\" of accepted or rejected as upstream's "
            "scoring script reads it", prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
            attempts=outcome.attempts, judge_prompt_sha256=prompts[JUDGE_SYSTEM].sha256,
            request_key=outcome.request_key)

    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        rows = []
        for (judge, prompt), group in judgments.group_by("judge", "judge_prompt_sha256",
                                                         maintain_order=True):
            examples = [CalibrationRow(row["category"], row["valid"], row["accepted"])
                        for row in group.iter_rows(named=True)]
            statuses = [(row["category"], row["status"]) for row in group.iter_rows(named=True)]
            table = calibration(examples)
            for category in (*CATEGORIES, ALL):
                part = [e for e in examples if category in (ALL, e.category)]
                overall = category == ALL
                rows.append(CalibrationScore(
                    judge=judge, judge_prompt_sha256=prompt, category=category,
                    examples=len(part),
                    agreement=table["agreement"] if overall else table[category],
                    accuracy=table["accuracy"] if overall else None,
                    precision=table["precision"] if overall else None,
                    recall=table["recall"] if overall else None,
                    f1=table["f1"] if overall else None,
                    no_verdict=sum(status == "no_verdict" and category in (ALL, c)
                                   for c, status in statuses),
                    judge_errors=sum(status == "judge_error" and category in (ALL, c)
                                     for c, status in statuses)).model_dump())
        return frame_of(pa.Table.from_pylist(rows, schema=arrow_schema(CalibrationScore)))

    lost_statuses = {"judge": "judge_error", "no verdict": "no_verdict"}

    def console_columns(self) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
        def rate(name: str) -> Callable[[dict[str, Any]], str]:
            return lambda row: percent(row[name])

        return [("category", lambda row: row["category"]),
                ("examples", lambda row: str(row["examples"])),
                ("agreement %", rate("agreement")), ("accuracy %", rate("accuracy")),
                ("precision %", rate("precision")), ("recall %", rate("recall")),
                ("F1 %", rate("f1")), ("no verdict", lambda row: str(row["no_verdict"])),
                ("judge errors", lambda row: str(row["judge_errors"]))]

    def write_outputs(self, out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                      judgments: pl.DataFrame, scores: pl.DataFrame,
                      provenance: dict[str, Any]) -> dict[str, str]:
        out.mkdir(parents=True, exist_ok=True)
        paths = {"verdicts.csv": out / "verdicts.csv", "calibration.json": out /
                 "calibration.json", "calibration.csv": out / "calibration.csv"}
        write_atomic(paths["verdicts.csv"], judgments.drop("thought").write_csv().encode())
        write_atomic(paths["calibration.json"], (json.dumps(
            {"scores": scores.to_dicts(), "proactflow": provenance}, indent=2,
            ensure_ascii=False) + "\n").encode())
        write_atomic(paths["calibration.csv"], scores.write_csv().encode())
        return {name: str(path) for name, path in paths.items()}
