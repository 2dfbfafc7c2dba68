"""ProactiveBench's rules outside the suite class: the names of its four prompts and the flag
that replaces each, what the judge is asked about for a response row, and how upstream's judge
asks again."""

from __future__ import annotations

import json
from typing import Any

from ...providers.chat import RetryPlan
from ...config.settings import ModelRole, RunSettings
from . import protocol

AGENT_SYSTEM, AGENT_INSTRUCTION = "agent_system", "agent_instruction"
JUDGE_ATTEMPTS = 10
"""Upstream's judge tries while a reply has no verdict to read (`--judge-attempts` sets it)."""
JUDGE_SYSTEM, JUDGE_INSTRUCTION = "judge", "judge_instruction"

PROMPT_FLAGS_ORDER = (AGENT_SYSTEM, AGENT_INSTRUCTION, JUDGE_SYSTEM, JUDGE_INSTRUCTION)
_PROMPT_FLAGS = {AGENT_SYSTEM: "--eval-system-prompt-file FILE",
                 AGENT_INSTRUCTION: f"--prompt {AGENT_INSTRUCTION}=FILE",
                 JUDGE_SYSTEM: "--judge-prompt FILE",
                 JUDGE_INSTRUCTION: f"--prompt {JUDGE_INSTRUCTION}=FILE"}


def missing_prompts_hint(settings: RunSettings, needed: tuple[str, ...]) -> str:
    """What to pass instead of the upstream prompts: the flag of every prompt still missing."""
    given = {AGENT_SYSTEM: bool(settings.model_under_test.generation.system_prompt),
             JUDGE_SYSTEM: bool(settings.judge_prompt_file)}
    missing = [_PROMPT_FLAGS[name] for name in needed
               if not given.get(name) and name not in settings.prompt_files]
    return "pass prompt files of your own (" + ", ".join(missing) + ")"


def proposal_text(task: Any) -> str | None:
    """A proposal as people read it: the task's text, or the JSON of one that is not text."""
    return task if task is None or isinstance(task, str) else json.dumps(task, ensure_ascii=False)


def judged_proposal(response: dict[str, Any]) -> Any:
    """What upstream's judge is asked about for a response row: the proposal as the reply held
    it, None for none, and "candidate_task" for an event whose every attempt failed."""
    if response["status"] != "ok":
        return protocol.FAILED_EVENT_PROPOSAL
    text = response.get("proposal_json")
    return None if text is None else json.loads(text)


def judge_retry(role: ModelRole) -> RetryPlan:
    """Upstream's judge: up to 10 tries while a reply has no verdict to read (a reply cut off
    at the token limit has none: its json5 parse fails, and upstream asks again), at 0.5 from
    the third when it asks at 0 (a judge set to another temperature keeps it)."""
    later = (("temperature", 0.5),) if role.generation.temperature == 0.0 else ()
    return RetryPlan(attempts=JUDGE_ATTEMPTS, later_params=later, later_from=2,
                     ask_again_when_truncated=True)
