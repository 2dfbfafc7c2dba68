"""ProactBench behind the suite seam: triggers as samples, a fixed context per trigger, an LLM
judge with the benchmark's rubric prompt, PASS / PARTIAL / FAIL weighted per phase.

Stage names, versions and key material are the ones ProactBench had before the seam, so stores
written before it keep serving their artifacts and calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import polars as pl

from ...cache.artifacts import ArtifactStore
from ...providers.chat import ChatOutcome, ChatRequest
from ...common.errors import UserError
from ...config.settings import PAPER_JUDGE, ModelRole, RunSettings
from ..sources import CorpusFile, fetch_upstream_judge_prompt, locate_corpus, read_judge_prompt_file
from ..base import DataSource, Prompts, StageNames, Step, Suite, Tables, percent
from ..declarations import ReportPart, SuiteModules
from ..stored_results import NarrowedResponses
from . import agreement, history, judgments, phase_scores, responses, triggers
from .exports import write_outputs
from .leaderboard import build_leaderboard, with_rank_ranges
from .tables import JudgmentRow, PhaseScoreRow, ResponseRow, TriggerRow

JUDGE_PROMPT = "judge"


class ProactBench(Suite):
    name = "proactbench"
    display_name = "ProactBench"
    main_output = "metrics.json"
    title = ("ProactBench (Boson AI, 2026): 198 dialogues, 624 trigger points with rubrics, "
             "judged PASS / PARTIAL / FAIL, weighted per phase")
    group_column = "phase"
    sample_noun = "triggers"
    sample_key = ("unique_id_eval", "turn")
    stages = StageNames(samples=triggers.STAGE, responses=responses.STAGE,
                        judgments=judgments.STAGE, scores=phase_scores.STAGE,
                        versions={triggers.STAGE: triggers.VERSION,
                                  responses.STAGE: responses.VERSION,
                                  judgments.STAGE: judgments.VERSION,
                                  phase_scores.STAGE: phase_scores.VERSION})
    tables = Tables(samples=TriggerRow, responses=ResponseRow, judgments=JudgmentRow,
                    scores=PhaseScoreRow)
    error_statuses = ("error", "generation_error", "judge_error")
    default_judge = PAPER_JUDGE

    def locate(self, settings: RunSettings, store: ArtifactStore) -> DataSource:
        corpus = locate_corpus(settings.corpus)
        return DataSource(corpus.revision, corpus.description, corpus)

    def samples_key_settings(self, settings: RunSettings, source: DataSource) -> dict[str, Any]:
        corpus = settings.corpus
        origin = None if corpus.path else f"{corpus.repo_id}/{corpus.filename}"
        return {"corpus_origin": origin, "corpus_revision": source.revision,
                "limit": corpus.limit, "phases": sorted(corpus.phases)}

    def build_samples(self, settings: RunSettings, source: DataSource) -> pl.DataFrame:
        corpus: CorpusFile = source.location
        frame = triggers.build_triggers(corpus.rows(), limit=settings.corpus.limit,
                                        phases=settings.corpus.phases)
        if frame.is_empty():
            raise UserError(f"no triggers to evaluate in {corpus.description} for phases "
                            f"{','.join(settings.corpus.phases)}")
        return frame

    def responses_key_settings(self, settings: RunSettings, prompts: Prompts) -> dict[str, Any]:
        return {}  # the optional system prompt is part of the role's own key material

    def prefix_group(self, sample: dict[str, Any]) -> str | None:
        return sample["unique_id_eval"]  # a dialogue's later triggers resend the earlier ones

    def generation_request(self, sample: dict[str, Any], earlier: list[Step],
                           role: ModelRole, prompts: Prompts, sample_index: int
                           ) -> ChatRequest | None:
        if not sample["evaluable"]:
            return None
        return responses.response_request(sample, role, sample_index)

    def response_row(self, sample: dict[str, Any], outcome: ChatOutcome | None,
                     role: ModelRole, sample_index: int) -> ResponseRow:
        return responses.response_row(sample, outcome, role, sample_index)

    def stand_in_reply(self, sample: dict[str, Any]) -> str | None:
        return sample["curation_response"]

    def plan_summary(self, samples: pl.DataFrame) -> str:
        unevaluable = samples.filter(~pl.col("evaluable")).height
        return (f"{samples['unique_id_eval'].n_unique()} dialogues, {samples.height} triggers"
                + (f" ({unevaluable} not evaluable: no user message)" if unevaluable else ""))

    def console_columns(self) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
        def count(name: str) -> Callable[[dict[str, Any]], str]:
            return lambda row: str(row[name])

        def rate(name: str) -> Callable[[dict[str, Any]], str]:
            return lambda row: percent(row[name])

        return [("phase", lambda row: row["phase"]), ("triggers", count("triggers")),
                ("evaluated", count("evaluated")), ("pass", count("pass")),
                ("partial", count("partial")), ("fail", count("fail")),
                ("not evaluated", count("not_evaluated")), ("refused", count("refused")),
                ("pass %", rate("pass_rate")),
                ("partial %", rate("partial_rate")), ("weighted %", rate("weighted_score"))]

    def judge_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        prompt = read_judge_prompt_file(settings.judge_prompt_file) \
            if settings.judge_prompt_file else fetch_upstream_judge_prompt(store)
        return Prompts({JUDGE_PROMPT: prompt})

    def judgments_key_settings(self, settings: RunSettings, prompts: Prompts) -> dict[str, Any]:
        return {"judge_prompt_sha256": prompts[JUDGE_PROMPT].sha256,
                "response_format": settings.judge_response_format}

    def judgment_request(self, sample: dict[str, Any], response: dict[str, Any],
                         role: ModelRole | None, prompts: Prompts, settings: RunSettings
                         ) -> ChatRequest | None:
        if response["status"] != "ok" or role is None:
            return None
        return judgments.judge_request({**response, **sample}, response["response"], role,
                                       prompts[JUDGE_PROMPT], settings.judge_response_format,
                                       response["sample_index"])

    def accept_judge_reply(self, text: str) -> Any:
        return judgments.parse_judge_reply(text)

    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> JudgmentRow:
        assert role is not None, "ProactBench is judged by a model"
        return judgments.judgment_row(response, outcome, role, prompts[JUDGE_PROMPT])

    def score(self, judgments_frame: pl.DataFrame) -> pl.DataFrame:
        return phase_scores.score_phases(judgments_frame)

    evaluations_with_triggers = True
    reports_section = False  # its evaluations' report is the page's own (evaluations_report)
    compares_judges = True

    def evaluations_report(self, out: Path, evaluations: list[Any], *, names: dict[str, str],
                           incomplete: list[Any], samples: int, seed: int) -> ReportPart:
        from .report import evaluations_report

        return evaluations_report(out, evaluations, names=names, incomplete=incomplete,
                                  samples=samples, seed=seed)

    def judge_agreement(self, judgments_frame: pl.DataFrame
                        ) -> tuple[pl.DataFrame, pl.DataFrame]:
        return agreement.judge_agreement(judgments_frame)

    modules = SuiteModules(__package__, history="history", imports="stored")

    def evaluations_view(self, evaluations: list[Any], samples: list[list[Any]],
                         details: list[dict[str, Any]], rows: list[list[Any]],
                         only: set[str] | None) -> dict[str, Any]:
        from .viewer import SPEC, add_evaluations

        add_evaluations(evaluations, samples, details, rows, only)
        return SPEC

    def narrow_stored_responses(self, store: ArtifactStore, evaluation: Any, limit: int | None,
                                groups: tuple[str, ...]) -> NarrowedResponses | None:
        from .stored import narrowed

        return narrowed(store, evaluation, limit, groups)

    def legacy_history_samples(self, samples: dict[str, list]) -> pl.DataFrame | None:
        return history.legacy_samples(samples) if "count" not in samples else None

    def write_outputs(self, out: Path, samples: pl.DataFrame, responses_frame: pl.DataFrame,
                      judgments_frame: pl.DataFrame, scores: pl.DataFrame,
                      provenance: dict[str, Any]) -> dict[str, str]:
        return write_outputs(out, samples, responses_frame, judgments_frame, scores, provenance)

    def sweep_leaderboard(self, store: ArtifactStore, judgments_keys: list[str], *,
                          seed: int = 0) -> pl.DataFrame:
        frames = [store.get_by_key(self.stages.judgments, key).frame() for key in judgments_keys]
        return build_leaderboard(pl.concat(frames), seed=seed)

    def headline(self, board: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
        columns = ["rank", "model", "judge", "weighted score", "95 % CI", "pass rate",
                   "evaluated", "not evaluated"]
        rows = []
        for row in with_rank_ranges(board).filter(pl.col("phase") == "OVERALL").to_dicts():
            rows.append([row["rank"], row["model"], row["judge"],
                         percent(row["weighted_score"]),
                         f"{percent(row['ci_low'])}–{percent(row['ci_high'])}",
                         percent(row["pass_rate"]), str(row["evaluated"]),
                         str(row["not_evaluated"])])
        return columns, rows

    def check_settings(self, settings: RunSettings) -> None:
        if settings.judge is None:
            raise UserError("ProactBench needs a judge: give --judge-model")
