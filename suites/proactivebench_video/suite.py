"""The video ProactiveBench (ProactiveVideoQA) behind the suite seam.

A sample is an episode of 1-s steps (protocol.py): at each step the model gets that second's
frame(s) and, for TV, its subtitle turns, in one growing chat with its own earlier outputs, and
answers or outputs the silence marker. Once an episode has ended, each gold turn is judged with
every distinct reply in its window (judging.py) and scored by PAUC; the scores are PAUC per part
at omega 0, 0.5 and 1 (scoring.py).

The data: `--corpus DIR` with `<PART>/anno.json` and the videos (annotations.py), `--parts` to
choose parts, `--limit N` for the first N samples of each. Frames are decoded once per video
into the store's `frames` folder (frames.py), keyed by the video's hash and the sampling.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel

from ...cache.artifacts import ArtifactStore
from ...providers.chat import ChatOutcome, ChatRequest
from ...common.errors import UserError
from ...schemas.arrow import to_frame
from ...config.settings import ModelRole, RunSettings
from ..base import DataSource, Prompts, StageNames, Step, Suite, Tables
from . import judging
from .annotations import (PARTS, VideoSample, parse_parts, read_corpus, require_corpus,
                          video_path)
from .chats import EpisodeChats
from .episode import FrameSets, sample_of, step_request, step_row
from .frames import VideoDecodeError, decoder_versions
from .hashes import VideoHashes
from .pauc import parse_judge_score
from .presentation import ProactiveBenchVideoPresentation
from .prompts import (DEFAULT_JUDGE_PROMPT, DEFAULT_SYSTEM_PROMPT, JUDGE, SYSTEM, FrameContext,
                      VideoPrompts, read_prompt, text_prompt)
from .protocol import (StreamingSettings, episode_plan, reply_time, settings_record,
                       step_count)
from .scoring import score_parts, write_outputs
from .tables import PartScoreRow, StepRow, TurnRow, VideoSampleRow

SUITE_NAME = "proactivebench-video"


class ProactiveBenchVideo(ProactiveBenchVideoPresentation, Suite):
    name = SUITE_NAME
    display_name = "ProactiveBench (video)"
    title = ("The video ProactiveBench (ProactiveVideoQA, 2025): a video LLM watches a video "
             "second by second and decides when to speak; PAUC per part scores content and "
             "timing")
    group_column = "part"
    sample_noun = "gold turns"
    """What the run's coverage counts (the plan names samples, steps and frames itself)."""
    sample_key = ("part", "question_id")
    step_column = "step"
    judges_episodes = True
    steps_known = True
    takes_parts = True
    stages = StageNames(samples="video_samples", responses="video_steps",
                        judgments="video_turns", scores="video_pauc")
    tables = Tables(samples=VideoSampleRow, responses=StepRow, judgments=TurnRow,
                    scores=PartScoreRow)
    sends_images = True
    option_names = ("skip_undecodable",)
    main_output = "metrics.csv"

    def parse_parts(self, text: str) -> tuple[str, ...]:
        return parse_parts(text)

    def __init__(self, streaming: StreamingSettings | None = None) -> None:
        self.streaming = streaming or StreamingSettings()
        self.frame_sets = FrameSets()
        self.chats = EpisodeChats()
        self.video_hashes = VideoHashes()
        # Where each located corpus's frames are stored, for build_samples to decode them into.
        self._frame_contexts: dict[str, FrameContext] = {}

    # The data.

    def check_settings(self, settings: RunSettings) -> None:
        require_corpus(settings.corpus.path)
        if tuple(settings.corpus.phases) != ("EMERGENT", "CRITICAL", "RECOVERY"):
            raise UserError("--phases is ProactBench's; the video ProactiveBench has parts: "
                            "choose them with --parts WEB,EGO,TV,VAD")

    def locate(self, settings: RunSettings, store: ArtifactStore) -> DataSource:
        corpus = require_corpus(settings.corpus.path)
        parts = settings.corpus.parts or PARTS
        chosen: list[VideoSample] = []
        for part in parts:
            in_part = read_corpus(corpus, (part,))
            chosen += in_part[:settings.corpus.limit] if settings.corpus.limit else in_part
        paths = [video_path(corpus, sample) for sample in chosen]
        assert all(paths), "read_corpus checked every video"
        try:
            hashes = self.video_hashes.of([p for p in paths if p], store.local_dir("frames"))
        except VideoDecodeError as exc:  # a video that cannot be read
            raise UserError(str(exc)) from None
        digest = hashlib.sha256()
        found: list[tuple[VideoSample, str, str]] = []
        for sample, path, sha in zip(chosen, paths, hashes):
            assert path is not None
            found.append((sample, path.relative_to(corpus).as_posix(), sha))
            digest.update(json.dumps([sample.model_dump(mode="json"), sha]).encode())
        revision = f"sha256:{digest.hexdigest()}"
        self._frame_contexts[revision] = FrameContext(corpus, store.local_dir("frames"))
        return DataSource(revision, str(corpus), found)

    def samples_key_settings(self, settings: RunSettings, source: DataSource) -> dict[str, Any]:
        return {"suite": self.name, "corpus_revision": source.revision,
                "parts": list(settings.corpus.parts or PARTS), "limit": settings.corpus.limit,
                "streaming": settings_record(self.streaming)}

    def build_samples(self, settings: RunSettings, source: DataSource) -> pl.DataFrame:
        rows = [VideoSampleRow(
            part=sample.part, question_id=sample.question_id, index=sample.index,
            video=sample.video, video_file=file, video_sha256=sha, question=sample.question,
            duration=sample.duration, steps=step_count(sample, self.streaming),
            user_turns_json=json.dumps([t.model_dump() for t in sample.user_turns],
                                       ensure_ascii=False),
            answers_json=json.dumps([t.model_dump() for t in sample.answers],
                                    ensure_ascii=False),
            extras_json=sample.extras_json) for sample, file, sha in source.location]
        if not rows:
            raise UserError(f"no samples to evaluate in {source.description}")
        context = self._frame_contexts.get(source.revision)
        if context is not None:
            undecodable = self._decode_ahead(rows, context)
            if undecodable and not settings.suite_options.get("skip_undecodable"):
                raise UserError(
                    f"{undecodable[0]}" + (f" (and {len(undecodable) - 1} other videos)"
                                           if len(undecodable) > 1 else "")
                    + ": every video is decoded before the first call; replace or remove it, "
                      "or run the rest with --skip-undecodable-videos")
        return to_frame(rows, VideoSampleRow)

    def _decode_ahead(self, rows: list[VideoSampleRow], context: FrameContext) -> list[str]:
        """Every video's frames decoded and stored now, with the samples and before any call,
        on threads (FFmpeg decodes outside the GIL): left to the responses stage, a video's first
        step would decode it on the event loop, holding every call in flight for seconds. The
        videos that cannot be decoded, each said in one line naming its file (with
        --skip-undecodable-videos their step rows report them)."""
        videos = {row.video_sha256: row.model_dump() for row in rows}
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            problems = list(pool.map(lambda row: self._frames_or_none(row, context),
                                     videos.values()))
        return sorted(problem for problem in problems if problem is not None)

    def _frames_or_none(self, row: dict[str, Any], context: FrameContext) -> str | None:
        try:
            self.frame_sets.get(row, context, self.streaming)
        except VideoDecodeError as exc:
            return str(exc)
        return None

    def plan_summary(self, samples: pl.DataFrame) -> str:
        """Samples, gold turns, steps (calls per rollout), frames sampled, images sent."""
        steps = frames = images = turns = 0
        for row in samples.iter_rows(named=True):
            video = sample_of(row)
            counts = episode_plan(video, self.streaming)
            steps, frames = steps + counts["steps"], frames + counts["frames"]
            images += counts["images_sent"]
            turns += len(video.answers)
        return (f"{samples.height} samples, {turns} gold turns, {steps} steps, {frames} frames, "
                f"{images} images sent")

    # The model under test.

    def generation_defaults(self, role: str, reasoning: bool) -> dict[str, Any]:
        if reasoning:
            return super().generation_defaults(role, reasoning)
        # The judge scores with one digit: deterministic where the provider allows.
        return {"temperature": 0.0 if role == "judge" else None, "max_tokens": 1024,
                "top_p": None}

    def generation_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        system = settings.model_under_test.generation.system_prompt
        prompt = text_prompt(system, "--eval-system-prompt-file") if system else text_prompt(
            DEFAULT_SYSTEM_PROMPT.format(silence=self.streaming.silence_marker), "proactflow")
        context = FrameContext(require_corpus(settings.corpus.path), store.local_dir("frames"))
        return VideoPrompts({SYSTEM: prompt}, context=context)

    def responses_key_settings(self, settings: RunSettings, prompts: Prompts) -> dict[str, Any]:
        return {"prompts": prompts.hashes(), "streaming": settings_record(self.streaming),
                "decoder": decoder_versions()}

    def step_limit(self, sample: dict[str, Any]) -> int:
        return sample["steps"]

    def another_step(self, sample: dict[str, Any], earlier: list[Step]) -> bool:
        # A failed call ends the episode (the next run asks it again); a reply that is not an
        # answer (empty, cut off, refused) is the model's, counted on its step, and playback
        # goes on with that step silent, as a model saying nothing would.
        going_on = earlier[-1][1]["status"] != "error" and len(earlier) < sample["steps"]
        if not going_on:
            self.chats.end(earlier)
        return going_on

    def generation_request(self, sample: dict[str, Any], earlier: list[Step],
                           role: ModelRole, prompts: Prompts, sample_index: int
                           ) -> ChatRequest | None:
        assert isinstance(prompts, VideoPrompts)
        return step_request(sample, earlier, role, prompts, self.frame_sets, self.streaming,
                            sample_index, self.chats)

    def step_row(self, sample: dict[str, Any], earlier: list[Step], outcome: ChatOutcome | None,
                 role: ModelRole, sample_index: int) -> StepRow:
        return step_row(sample, earlier, outcome, role, sample_index, self.frame_sets,
                        self.streaming)

    def response_row(self, sample: dict[str, Any], outcome: ChatOutcome | None,
                     role: ModelRole, sample_index: int) -> StepRow:
        return self.step_row(sample, [], outcome, role, sample_index)

    def stand_in_reply(self, sample: dict[str, Any]) -> str | None:
        return self.streaming.silence_marker

    # The judge: one call per distinct in-window reply of each gold turn.

    def judge_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        if settings.judge_prompt_file:
            return Prompts({JUDGE: read_prompt(settings.judge_prompt_file, "--judge-prompt")})
        return Prompts({JUDGE: text_prompt(DEFAULT_JUDGE_PROMPT, "proactflow")})

    def judgments_key_settings(self, settings: RunSettings, prompts: Prompts) -> dict[str, Any]:
        return {"prompts": prompts.hashes(), "parse": "first character, 1-3"}

    def episode_judge_requests(self, sample: dict[str, Any], steps: list[dict[str, Any]],
                               role: ModelRole | None, prompts: Prompts,
                               settings: RunSettings) -> list[ChatRequest]:
        return judging.judge_requests(sample, steps, role, prompts, self.streaming)

    def episode_judge_calls_at_most(self, sample: dict[str, Any]) -> int:
        """One call per step whose reply would fall in a gold turn's window: every reply
        distinct, none silent."""
        times = [reply_time(step, self.streaming) for step in range(sample["steps"])]
        return sum(turn.reply_start <= time <= turn.reply_end
                   for turn in sample_of(sample).answers for time in times)

    def episode_judgment_rows(self, sample: dict[str, Any], steps: list[dict[str, Any]],
                              outcomes: list[ChatOutcome], role: ModelRole | None,
                              prompts: Prompts) -> list[BaseModel]:
        return judging.judgment_rows(sample, steps, outcomes, role, prompts, self.streaming)

    def accept_judge_reply(self, text: str) -> int:
        return parse_judge_score(text)

    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> TurnRow:
        raise AssertionError("the video ProactiveBench judges whole episodes")

    # Aggregation and outputs.

    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        return score_parts(judgments)

    lost_statuses = {"generation": "generation_error", "judge": "judge_error",
                     "undecodable video": "error", "refused": "refused"}
    lasting_losses = {"undecodable video": "decoding a file fails the same way every time: "
                                           "replace or remove it"}

    def write_outputs(self, out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                      judgments: pl.DataFrame, scores: pl.DataFrame,
                      provenance: dict[str, Any]) -> dict[str, str]:
        return write_outputs(out, samples, responses, judgments, scores, provenance)

