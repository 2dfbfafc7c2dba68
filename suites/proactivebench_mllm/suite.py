"""The multimodal ProactiveBench (`proactivebench` 0.1.1, MIT) behind the suite seam.

Each sample is an environment: a step shows one image (the current view) with the package's
multiple-choice text, as one single-turn chat; the reply, read by the package's rules, ends the
episode (right category, wrong or unreadable reply, step limit) or moves to the next view. The
state is never stored: it is replayed from the step rows so far, so a killed run resumes
mid-episode from the per-call cache. In OEG mode a sample is one free answer to its first view,
judged by an LLM against the package's acceptable answers.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import polars as pl

from ...cache.artifacts import ArtifactStore
from ...providers.chat import ChatOutcome, ChatRequest, RetryPlan
from ...providers.prompt_cache import CacheHint
from ...common.errors import UserError
from ...schemas.arrow import to_frame
from ...config.settings import ModelRole, RunSettings
from ..sources import Prompt
from ..base import DataSource, Prompts, StageNames, Step, Suite, Tables
from . import oeg, upstream
from .corpus import check_every_image, check_first_images, read_corpus
from .datasets import DATASETS, Dataset, mode_of, parse_datasets
from .episode import replayed, sample_json, sample_of, shown, step_record
from .outcomes import judgment_row, scores
from .presentation.outputs import write_outputs
from .presentation import ProactiveBenchMllmPresentation
from .source import folder_revision, hub_corpus
from .tables import DatasetScoreRow, EntryRow, OutcomeRow, StepRow
from .presentation.views import note_corpus_folder

JUDGE_SYSTEM, JUDGE_USER = "oeg_judge_system", "oeg_judge_user"
CALL_FAILURES = ("error", "empty", "truncated", "blocked")


class ProactiveBenchMllm(ProactiveBenchMllmPresentation, Suite):
    name = "proactivebench-mllm"
    display_name = "ProactiveBench (multimodal)"
    title = ("The multimodal ProactiveBench (proactivebench 0.1.1): seven repurposed image "
             "datasets where the model may ask to move an occluder, deblur, rotate... before "
             "naming the category; acc and proactive steps per dataset")
    group_column = "dataset"
    sample_key = ("dataset", "sample_id")
    step_column = "step"
    stages = StageNames(samples="mllm_entries", responses="mllm_steps",
                        judgments="mllm_outcomes", scores="mllm_scores",
                        versions={"mllm_scores": 2})
    tables = Tables(samples=EntryRow, responses=StepRow, judgments=OutcomeRow,
                    scores=DatasetScoreRow)
    sends_images = True
    needs_judge = False  # MCQA is scored by the package's rules; --mode oeg asks for a judge
    option_names = ("datasets", "mode", "hint", "reference", "package")
    error_statuses = (*CALL_FAILURES, "generation_error", "judge_error")
    main_output = "metrics.csv"

    def __init__(self, wheel_sha256: str = upstream.WHEEL_SHA256) -> None:
        self.wheel_sha256 = wheel_sha256
        """The pinned release's hash (a test registers a suite taking its synthetic wheel)."""
        # Where each corpus revision's images are, found by `locate`: a path is no part of a
        # samples row (the same corpus moved must keep its keys).
        self._folders: dict[str, Path] = {}
        self._upstream: dict[tuple[str, str | None], upstream.Upstream] = {}
        # The hash of the image a request just sent, by its key, for its step row (no second
        # encoding).
        self._sent: dict[str, str] = {}

    # The data.

    def _datasets(self, settings: RunSettings) -> tuple[Dataset, ...]:
        value = settings.suite_options.get("datasets")
        return parse_datasets(value if isinstance(value, str) else None)

    def _load_upstream(self, settings: RunSettings, store: ArtifactStore) -> upstream.Upstream:
        package = settings.suite_options.get("package")
        wheel = str(package) if isinstance(package, str) else None
        found = self._upstream.get((store.url, wheel))
        if found is None:
            try:
                found = upstream.load_upstream(store, wheel, self.wheel_sha256)
            except UserError as exc:
                raise UserError(f"{exc} (offline: --package FILE, a copy of the "
                                f"{upstream.WHEEL_NAME})") from None
            self._upstream[(store.url, wheel)] = found
        return found

    def check_settings(self, settings: RunSettings) -> None:
        self._datasets(settings)
        mode, options = mode_of(settings), settings.suite_options
        if mode == "oeg" and settings.judge is None:
            raise UserError("--mode oeg needs --judge-model (the paper's judge is Qwen3-8B with "
                            "thinking)")
        if mode == "mcqa" and settings.judge is not None:
            raise UserError("--judge-model is for --mode oeg: MCQA is scored by the package's "
                            "rules")
        if mode == "oeg" and options.get("reference"):
            raise UserError("--reference is an MCQA variant: OEG asks about the first view")
        if tuple(settings.corpus.phases) != ("EMERGENT", "CRITICAL", "RECOVERY"):
            raise UserError("--phases is ProactBench's; this suite has --datasets")
        if settings.corpus.path and not Path(settings.corpus.path).expanduser().is_dir():
            raise UserError(f"--corpus for {self.name} is a folder in the package's layout: "
                            f"{settings.corpus.path} is not a folder")

    def locate(self, settings: RunSettings, store: ArtifactStore) -> DataSource:
        datasets = self._datasets(settings)
        data = self._load_upstream(settings, store)
        if settings.corpus.path:
            folder = Path(settings.corpus.path).expanduser().resolve()
            revision, description = folder_revision(folder, datasets), str(folder)
        else:
            folder, description = hub_corpus(store.local_dir("corpora"), datasets,
                                             settings.corpus.revision)
            revision = description
        self._folders[revision] = folder
        note_corpus_folder(store, revision, folder)
        return DataSource(revision, description, (folder, data))

    def samples_key_settings(self, settings: RunSettings, source: DataSource) -> dict[str, Any]:
        options = settings.suite_options
        return {"suite": self.name, "corpus_revision": source.revision,
                "datasets": [d.short for d in self._datasets(settings)],
                "mode": mode_of(settings), "hint": bool(options.get("hint")),
                "reference": bool(options.get("reference")), "limit": settings.corpus.limit,
                "upstream_wheel_sha256": self.wheel_sha256}

    def build_samples(self, settings: RunSettings, source: DataSource) -> pl.DataFrame:
        folder, data = source.location
        mode, options = mode_of(settings), settings.suite_options
        chosen = read_corpus(folder, self._datasets(settings), data.filter)
        rows: list[EntryRow] = []
        for short, samples in chosen.items():
            if mode == "oeg":  # the package's 100, shuffled with seed 0
                samples = oeg.select_oeg_samples(samples)
            samples = samples[:settings.corpus.limit] if settings.corpus.limit else samples
            check_first_images(folder, samples)
            check_every_image(folder, samples)
            seen: set[int] = set()
            for sample in samples:
                if sample.sample_id in seen:
                    raise UserError(f"{short}: sample id {sample.sample_id} appears twice "
                                    f"(line {sample.line})")
                seen.add(sample.sample_id)
                rows.append(EntryRow(
                    dataset=short, sample_id=sample.sample_id, line=sample.line,
                    entry_json=sample_json(sample), corpus_revision=source.revision, mode=mode,
                    hint=bool(options.get("hint")), reference=bool(options.get("reference")),
                    answer=sample.answer, max_steps=sample.max_steps,
                    oeg_answers=oeg.valid_answers(sample, 1) if mode == "oeg" else None,
                    upstream_oeg_answers=oeg.valid_answers(sample, 2) if mode == "oeg" else None,
                    prediction_thr=data.prediction_thr[short] if mode == "oeg" else None))
        if not rows:
            raise UserError(f"no samples to evaluate in {source.description}")
        order = {d.short: index for index, d in enumerate(DATASETS)}
        return to_frame(rows, EntryRow).sort(
            pl.col("dataset").replace_strict(order, return_dtype=pl.Int64), "sample_id")

    def plan_summary(self, samples: pl.DataFrame) -> str:
        return f"{samples.height} samples of {samples['dataset'].n_unique()} datasets"

    # The model under test: one single-turn chat per step.

    def generation_defaults(self, role: str, reasoning: bool) -> dict[str, Any]:
        # The paper's example: greedy decoding (no sampling parameter sent), 50 new tokens.
        # A reasoning model spends its budget on hidden reasoning first: it gets room for it.
        return {"temperature": None, "max_tokens": 32768 if reasoning or role == "judge"
                else 50, "top_p": None}

    def option_generation_defaults(self, role: str, reasoning: bool,
                                   options: dict[str, Any]) -> dict[str, Any]:
        if options.get("mode") == "oeg":  # oeg.py: max_new_tokens=2**15, the model's sampling
            return {"temperature": None, "max_tokens": 2 ** 15, "top_p": None}
        return self.generation_defaults(role, reasoning)

    def _folder(self, row: dict[str, Any]) -> Path:
        folder = self._folders.get(row["corpus_revision"])
        if folder is None:
            raise UserError(f"the corpus {row['corpus_revision']} was not located in this "
                            "process (give the same --corpus as the run that stored it)")
        return folder

    def step_limit(self, sample: dict[str, Any]) -> int:
        if sample["mode"] == "oeg" or sample["reference"]:
            return 1
        return max(1, sample["max_steps"])

    def generation_request(self, sample: dict[str, Any], earlier: list[Step],
                           role: ModelRole, prompts: Prompts, sample_index: int
                           ) -> ChatRequest | None:
        entry, steps = sample_of(sample), [row for _, row in earlier]
        view = shown(self._folder(sample), entry, sample,
                     replayed(entry, sample, steps))
        if view.problem is not None:
            return None  # its step row says why
        assert view.image is not None and view.prompt is not None
        request = ChatRequest.build(role, [("user", (view.image, view.prompt))],
                                    sample_index=sample_index)
        # By the request's key: evaluations of other models or variants run at once in a sweep.
        self._sent[request.key] = view.image.sha256
        return request

    def step_row(self, sample: dict[str, Any], earlier: list[Step], outcome: ChatOutcome | None,
                 role: ModelRole, sample_index: int) -> StepRow:
        entry, steps = sample_of(sample), [row for _, row in earlier]
        state = replayed(entry, sample, steps)
        folder = self._folder(sample)
        view = shown(folder, entry, sample, state, with_image=False)
        sent = self._sent.pop(outcome.request_key, None) if outcome is not None else None
        if sent is None and outcome is not None and view.problem is None:
            image = shown(folder, entry, sample, state).image  # a request built elsewhere
            sent = image.sha256 if image is not None else None
        return step_record(sample, entry, state, view, sent, outcome, role.model, sample_index,
                           len(steps))

    def response_row(self, sample: dict[str, Any], outcome: ChatOutcome | None,
                     role: ModelRole, sample_index: int) -> StepRow:
        return self.step_row(sample, [], outcome, role, sample_index)

    def another_step(self, sample: dict[str, Any], earlier: list[Step]) -> bool:
        return not earlier[-1][1]["final"]

    # Scoring: the package's rules (MCQA) or the OEG judge.

    def judge_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        if mode_of(settings) != "oeg":
            return Prompts()
        data = self._load_upstream(settings, store)
        return Prompts({
            JUDGE_SYSTEM: Prompt(data.system_prompt, _sha(data.system_prompt), data.source),
            JUDGE_USER: Prompt(data.user_prompt, _sha(data.user_prompt), data.source)})

    def judgment_request(self, sample: dict[str, Any], response: dict[str, Any],
                         role: ModelRole | None, prompts: Prompts, settings: RunSettings
                         ) -> ChatRequest | None:
        if sample["mode"] != "oeg" or role is None or response["status"] != "ok":
            return None
        pinned = upstream.Upstream(filter={}, prediction_thr={},
                                   system_prompt=prompts[JUDGE_SYSTEM].text,
                                   user_prompt=prompts[JUDGE_USER].text, source="")
        messages = oeg.judge_messages(pinned, response["prompt"], sample["oeg_answers"],
                                      response["response"])
        return ChatRequest.build(role, [(m["role"], m["content"]) for m in messages],
                                 sample_index=response["sample_index"],
                                 cache=CacheHint(f"judge:{prompts[JUDGE_SYSTEM].sha256[:16]}"),
                                 retry=RetryPlan(check=partial(
                                     oeg.check_verdicts, sample["oeg_answers"],
                                     sample["prediction_thr"])))

    def accept_judge_reply(self, text: str) -> str:
        # Read in judgment_row against the sample's answers; the request's check has asked the
        # judge again (its attempts) while its list was missing or of the wrong length.
        return text

    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> OutcomeRow:
        return judgment_row(sample, response, outcome, role)

    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        return scores(judgments)

    scored_statuses = ("scored", "image_error")
    lost_statuses = {"generation": "generation_error", "judge": "judge_error",
                     "environment crash": "environment_crash", "refused": "refused"}

    def counted_rows(self, judgments: pl.DataFrame) -> pl.DataFrame:
        return judgments.filter(pl.col("final"))

    def write_outputs(self, out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                      judgments: pl.DataFrame, scores: pl.DataFrame,
                      provenance: dict[str, Any]) -> dict[str, str]:
        return write_outputs(out, samples, responses, judgments, scores, provenance)


def _sha(text: str) -> str:
    from ...cache.keys import text_sha256

    return text_sha256(text)
