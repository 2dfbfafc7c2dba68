"""The suite's prompts: the model's system prompt and the judge's, in proactflow's own words.

The official prompts could not be read (the shared facts give only a paraphrase of each), so the
defaults below are written here from that description, not copied; a user holding the official
texts passes them with --eval-system-prompt-file and --judge-prompt. Either way each prompt's
sha256 enters its role's keys.

The model's prompts travel with a frame context (where the corpus and the stored frames are):
the seam hands a suite its prompts, not the run's store, when it plans a step's request.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...cache.keys import text_sha256
from ...common.errors import UserError
from ..base import Prompts
from ..sources import Prompt

SYSTEM, JUDGE = "system", "judge"

DEFAULT_SYSTEM_PROMPT = (
    "You are watching a video while it plays. At the start the user asks you a question. "
    "Every second you receive what the video has shown in that second (its frames, and any "
    "subtitle lines spoken then). Each time, decide whether what you have seen so far lets "
    "you answer the question, or add to an answer you gave earlier. If it does, write your "
    "answer in one or two short sentences. If it does not, write exactly {silence} and "
    "nothing else.")
"""{silence} is the silence marker of the run's streaming settings."""

DEFAULT_JUDGE_PROMPT = (
    "You grade a video question-answering assistant. You get the question, the reference "
    "answer and the assistant's answer. Rate how much of the reference answer the assistant's "
    "answer covers: 3 when it covers it mostly or fully, 2 when it covers part of it, 1 when it "
    "is wrong or does not address it. Answer with the digit alone.")


@dataclass(frozen=True)
class FrameContext:
    """Where a step's frames come from."""

    corpus: Path
    """The --corpus folder: sample rows name their video relative to it."""
    frames: Path
    """The store's frame folder (frames.stored_frames' `folder`)."""


@dataclass(frozen=True)
class VideoPrompts(Prompts):
    """The model's prompts, with the frame context its requests need (no key material: the
    video hashes are in the samples, the sampling settings in the responses key)."""

    context: FrameContext | None = None


def text_prompt(text: str, source: str) -> Prompt:
    return Prompt(text, text_sha256(text), source)


def read_prompt(path: str, option: str) -> Prompt:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UserError(f"{option} {path}: cannot read it ({reason})") from None
    if not text.strip():
        raise UserError(f"{option} {path}: the file is empty")
    return text_prompt(text, path)
