"""Proactive Agent's ProactiveBench behind the suite seam.

A trace is an episode: the model under test answers its events in order, in one growing chat
where its own earlier replies are the assistant turns (suites/proactiveagent/protocol.py builds
each request byte for byte as upstream's runner). The judge (the authors' reward model behind an
OpenAI-compatible endpoint, or any LLM) accepts or rejects each proposal given the observations so
far; the metrics are upstream's, per split, with 95 % intervals from resampling traces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import json5
import polars as pl

from ...cache.artifacts import ArtifactStore
from ...cache.keys import text_sha256
from ...providers.chat import ChatOutcome, ChatRequest, RetryPlan
from ...providers.prompt_cache import CacheHint
from ...common.errors import UserError
from ...providers.llm import INVALID_MODEL_REPLY
from ...schemas.arrow import to_frame
from ...config.settings import ModelRole, RunSettings
from ..sources import Prompt
from ..base import DataSource, Prompts, StageNames, Step, Suite, Tables
from . import protocol, upstream
from .data import TraceEvent, read_local_corpus
from .presentation.outputs import write_outputs
from .presentation import ProactiveAgentPresentation
from .rules import (AGENT_INSTRUCTION, AGENT_SYSTEM, JUDGE_INSTRUCTION, JUDGE_SYSTEM,
                    PROMPT_FLAGS_ORDER, judge_retry, judged_proposal, missing_prompts_hint,
                    proposal_text)
from .scoring import score_splits
from .tables import (AgentResponseRow, AgentStatus, EventRow, SplitScoreRow, VerdictRow,
                     VerdictStatus)

_CARRIED: dict[str, VerdictStatus] = {
    "invalid_reply": "invalid_reply", "empty": "empty_response",
    "truncated": "truncated_response", "blocked": "blocked_response",
    "not_imported": "not_imported", "refused": "refused"}
"""Response status of a reply that is not judged -> the verdict status it carries."""


def _prompt(text: upstream.PromptText) -> Prompt:
    return Prompt(text.text, text.sha256, text.source)


class ProactiveAgent(ProactiveAgentPresentation, Suite):
    name = "proactiveagent"
    display_name = "ProactiveBench (Proactive Agent)"
    title = ("Proactive Agent's ProactiveBench (THUNLP, 2024): event traces answered in order, "
             "a reward model accepting or rejecting each proposed task, F1 per split")
    group_column = "split"
    sample_noun = "events"
    sample_key = ("trace", "event_index")
    # Version 2: proposals of any JSON type, failed events judged as upstream judges them.
    stages = StageNames(samples="proactiveagent_events", responses="proactiveagent_responses",
                        judgments="proactiveagent_verdicts", scores="proactiveagent_metrics",
                        versions={"proactiveagent_responses": 2, "proactiveagent_verdicts": 2,
                                  "proactiveagent_metrics": 4})
    tables = Tables(samples=EventRow, responses=AgentResponseRow, judgments=VerdictRow,
                    scores=SplitScoreRow)
    error_statuses = ("error", "invalid_reply", "generation_error", "judge_error")
    takes_judge_response_format = False
    main_output = "metrics.csv"

    prompts_needed: tuple[str, ...] = PROMPT_FLAGS_ORDER
    """The prompts a run of this suite sends (named in the offline error when missing)."""

    def __init__(self, prompts_needed: tuple[str, ...] = PROMPT_FLAGS_ORDER) -> None:
        self._loaded_prompts: dict[str, upstream.Prompts] = {}
        self.prompts_needed = prompts_needed

    # The data: a local folder (--corpus DIR), or the pinned upstream commit.

    def locate(self, settings: RunSettings, store: ArtifactStore) -> DataSource:
        folder = settings.corpus.path
        if folder:
            events, splits = read_local_corpus(folder)
            digest = text_sha256(json.dumps([splits, [e.model_dump() for e in events]]))
            return DataSource(f"sha256:{digest}", folder, (events, splits))
        events, splits = upstream.load_upstream_corpus(store)
        return DataSource(upstream.UPSTREAM_COMMIT,
                          f"{upstream.UPSTREAM_REPO}@{upstream.UPSTREAM_COMMIT[:12]}",
                          (events, splits))

    def samples_key_settings(self, settings: RunSettings, source: DataSource) -> dict[str, Any]:
        return {"suite": self.name, "corpus_origin": None if settings.corpus.path
                else upstream.UPSTREAM_REPO, "corpus_revision": source.revision,
                "limit": settings.corpus.limit}

    def build_samples(self, settings: RunSettings, source: DataSource) -> pl.DataFrame:
        events: list[TraceEvent] = source.location[0]
        traces = sorted({event.trace for event in events})
        kept = set(traces[:settings.corpus.limit] if settings.corpus.limit else traces)
        rows: list[EventRow] = []
        seen: dict[str, list[dict[str, Any]]] = {}  # trace -> observations so far
        for event in sorted(events, key=lambda e: (e.trace, e.index)):
            if event.trace not in kept:
                continue
            so_far = seen.setdefault(event.trace, [])
            so_far.append(event.observation())
            rows.append(EventRow(
                trace=event.trace, event_index=event.index, time=event.time, event=event.event,
                observations_json=json.dumps(so_far, ensure_ascii=False),
                task_status=event.task_status, splits=list(event.splits)))
        if not rows:
            raise UserError(f"no events to evaluate in {source.description}")
        return to_frame(rows, EventRow)

    def check_settings(self, settings: RunSettings) -> None:
        if settings.judge is None:
            raise UserError("ProactiveBench needs a judge: give --judge-model (the authors' "
                            "reward model behind --judge-api-base, or any LLM)")
        if tuple(settings.corpus.phases) != ("EMERGENT", "CRITICAL", "RECOVERY"):
            raise UserError("--phases is ProactBench's; ProactiveBench has splits (all of them "
                            "are scored)")
        if settings.corpus.path and not Path(settings.corpus.path).expanduser().is_dir():
            raise UserError(f"--corpus for proactiveagent is a folder holding splits.json and "
                            f"the trace files: {settings.corpus.path} is not a folder")

    def plan_summary(self, samples: pl.DataFrame) -> str:
        return f"{samples['trace'].n_unique()} traces, {samples.height} events"

    # The model under test: one growing chat per trace.

    def generation_defaults(self, role: str, reasoning: bool) -> dict[str, Any]:
        if reasoning:
            return super().generation_defaults(role, reasoning)
        # Upstream's runner asks at 0.5 (its temperature expression is 0.5 on every attempt);
        # its judge at 0 (0.5 for its third and later attempts: judge_retry). Neither sends a
        # token limit: the provider's default applies.
        return {"temperature": 0.5 if role == "model_under_test" else 0.0,
                "max_tokens": None, "top_p": None}

    def _upstream_prompts(self, store: ArtifactStore, hint: str) -> upstream.Prompts:
        """The four pinned prompts, read and checked once per store in this process (each role
        asks for two of them, from the same two upstream modules)."""
        loaded = self._loaded_prompts.get(store.url)
        if loaded is None:
            loaded = self._loaded_prompts[store.url] = upstream.load_upstream_prompts(store, hint)
        return loaded

    def _prompt(self, settings: RunSettings, store: ArtifactStore, name: str,
                upstream_name: str, needed: tuple[str, ...] = PROMPT_FLAGS_ORDER) -> Prompt:
        path = settings.prompt_files.get(name)
        if path:
            return _prompt(upstream.read_prompt_file(path))
        return _prompt(getattr(self._upstream_prompts(store, missing_prompts_hint(
            settings, needed)), upstream_name))

    def generation_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        system = settings.model_under_test.generation.system_prompt
        return Prompts({
            AGENT_SYSTEM: Prompt(system, text_sha256(system), "--eval-system-prompt-file")
            if system else self._prompt(settings, store, AGENT_SYSTEM, "agent_system",
                                        self.prompts_needed),
            AGENT_INSTRUCTION: self._prompt(settings, store, AGENT_INSTRUCTION,
                                            "step_instruction", self.prompts_needed)})

    def episodes(self, samples: pl.DataFrame) -> list[list[int]]:
        by_trace: dict[str, list[int]] = {}
        for index, trace in enumerate(samples["trace"].to_list()):
            by_trace.setdefault(trace, []).append(index)
        return list(by_trace.values())  # rows are sorted by (trace, event_index)

    def generation_request(self, sample: dict[str, Any], earlier: list[Step],
                           role: ModelRole, prompts: Prompts, sample_index: int
                           ) -> ChatRequest | None:
        events = [(event["time"], event["event"]) for event, _ in earlier] + \
            [(sample["time"], sample["event"])]
        # An event without an accepted reply stays in the chat as upstream leaves it.
        replies = [reply["history_text"] if reply["status"] == "ok" else None
                   for _, reply in earlier]
        messages = protocol.agent_messages(prompts[AGENT_SYSTEM].text,
                                           prompts[AGENT_INSTRUCTION].text, events, replies)
        # Upstream's client raises on a reply cut off at the token limit: asked again. The
        # next event re-sends this chat but its last turn (then bare): the cache's prefix.
        return ChatRequest.build(role, messages, sample_index=sample_index,
                                 retry=RetryPlan(ask_again_when_truncated=True),
                                 cache=CacheHint(f"trace:{sample['trace']}:{sample_index}",
                                                 shared=len(messages) - 1, chain=True))

    def reply_parser(self) -> Callable[[str], Any] | None:
        return protocol.parse_agent_reply

    def stand_in_reply(self, sample: dict[str, Any]) -> str | None:
        return json.dumps({"Proactive Task": None})

    def response_row(self, sample: dict[str, Any], outcome: ChatOutcome | None,
                     role: ModelRole, sample_index: int) -> AgentResponseRow:
        assert outcome is not None, "every event is asked"
        status: AgentStatus = outcome.status
        reply: protocol.AgentReply | None = outcome.parsed if outcome.ok else None
        if outcome.ok and reply is None:  # a stand-in or a cached reply read again
            try:
                reply = protocol.parse_agent_reply(outcome.content or "")
            except ValueError as exc:
                status, outcome.error = "invalid_reply", f"{INVALID_MODEL_REPLY}: {exc}"
        if status == "error" and (outcome.error or "").startswith(INVALID_MODEL_REPLY):
            status = "invalid_reply"
        task = reply.proactive_task if reply else None
        return AgentResponseRow(
            trace=sample["trace"], event_index=sample["event_index"], sample_index=sample_index,
            model=role.model, status=status, message=outcome.error, response=outcome.content,
            proposed_task=proposal_text(task),
            proposal_json=None if task is None else json.dumps(task, ensure_ascii=False),
            history_text=reply.history_text if reply else None,
            finish_reason=outcome.finish_reason, prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
            attempts=outcome.attempts, request_key=outcome.request_key,
            served_model=outcome.served_model, system_fingerprint=outcome.system_fingerprint,
            litellm_version=outcome.litellm_version)

    # The judge: accepted or rejected, given the observations so far.

    def judge_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        system = _prompt(upstream.read_prompt_file(settings.judge_prompt_file)) \
            if settings.judge_prompt_file else \
            self._prompt(settings, store, JUDGE_SYSTEM, "reward_system", self.prompts_needed)
        return Prompts({JUDGE_SYSTEM: system,
                        JUDGE_INSTRUCTION: self._prompt(settings, store, JUDGE_INSTRUCTION,
                                                        "reward_instruction",
                                                        self.prompts_needed)})

    def judgment_request(self, sample: dict[str, Any], response: dict[str, Any],
                         role: ModelRole | None, prompts: Prompts, settings: RunSettings
                         ) -> ChatRequest | None:
        if role is None or response["status"] == "not_imported":
            return None
        # An imported published trace is judged on its own history, as upstream judged it.
        observations = response.get("judge_observations_json") or sample["observations_json"]
        messages = protocol.judge_messages(
            prompts[JUDGE_SYSTEM].text, prompts[JUDGE_INSTRUCTION].text,
            json.loads(observations), judged_proposal(response))
        return ChatRequest.build(role, messages, sample_index=response["sample_index"],
                                 retry=judge_retry(role),
                                 cache=CacheHint(f"judge:{prompts[JUDGE_SYSTEM].sha256[:16]}"))

    def accept_judge_reply(self, text: str) -> tuple[bool, str | None]:
        accepted = protocol.parse_judge_reply(text)
        thought = json5.loads(text).get("thought")
        return accepted, thought if isinstance(thought, str) else None

    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> VerdictRow:
        common: dict[str, Any] = dict(
            trace=response["trace"], event_index=response["event_index"],
            sample_index=response["sample_index"], splits=sample["splits"],
            model=response["model"],
            judge=role.model if role else "-", judge_prompt_sha256=prompts[JUDGE_SYSTEM].sha256,
            proposed=None, accepted=None, thought=None, prompt_tokens=None,
            completion_tokens=None, latency_s=None, attempts=0, request_key=None,
            judged_candidate_task=response["status"] != "ok" and outcome is not None)
        carried: VerdictStatus | None = None if response["status"] == "ok" else \
            _CARRIED.get(response["status"], "generation_error")
        if outcome is None:
            return VerdictRow(**common, status=carried or "generation_error",
                              message=response["message"])
        common.update(prompt_tokens=outcome.prompt_tokens,
                      completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
                      attempts=outcome.attempts, request_key=outcome.request_key,
                      served_model=outcome.served_model,
                      system_fingerprint=outcome.system_fingerprint,
                      litellm_version=outcome.litellm_version,
                      proposed=judged_proposal(response) is not None)
        if carried is not None:
            # A failed event: left out of the strict counts by its status, its verdict on
            # upstream's "candidate_task" kept for the upstream view (metrics.csv).
            verdict = outcome.parsed if outcome.ok else (None, None)
            note = "" if outcome.ok else f"; the judge gave no verdict on \"" \
                f"{protocol.FAILED_EVENT_PROPOSAL}\" ({outcome.error})"
            return VerdictRow(**{**common, "accepted": verdict[0], "thought": verdict[1]},
                              status=carried, message=f"{response['message']}{note}")
        if outcome.final:
            return VerdictRow(**common, status="refused", message=f"judge: {outcome.error}")
        if not outcome.ok:
            return VerdictRow(**common, status="judge_error", message=outcome.error)
        accepted, thought = outcome.parsed
        return VerdictRow(**{**common, "accepted": accepted, "thought": thought},
                          status="scored", message=None)

    # Aggregation and outputs.

    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        return score_splits(judgments)

    lost_statuses = {"generation": "generation_error", "invalid reply": "invalid_reply",
                     "judge": "judge_error", "not imported": "not_imported",
                     "refused": "refused"}

    def write_outputs(self, out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                      judgments: pl.DataFrame, scores: pl.DataFrame,
                      provenance: dict[str, Any]) -> dict[str, str]:
        return write_outputs(out, samples, responses, judgments, scores, provenance)
