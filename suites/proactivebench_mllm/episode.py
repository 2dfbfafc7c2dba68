"""An episode driven one stored step at a time: the sample rebuilt from its row, its state
replayed from the replies so far (never stored), and what the next step shows."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...providers.chat import ChatOutcome
from ...providers.content import ImagePart
from . import environment
from .environment import EpisodeState, View
from .environment.images import image_bytes
from .oeg import oeg_question
from .sample import Crop, EnvironmentCrash, Sample
from .tables import StepRow


def sample_json(sample: Sample) -> str:
    return json.dumps(dataclasses.asdict(sample), ensure_ascii=False, sort_keys=True)


def sample_of(row: dict[str, Any]) -> Sample:
    """The Sample of a samples row (`entry_json`)."""
    fields = json.loads(row["entry_json"])
    crop = fields.pop("crop")
    for name in ("options", "categories", "valid_images"):
        fields[name] = tuple(fields[name])
    return Sample(**fields, crop=Crop(**crop) if crop is not None else None)


def replayed(sample: Sample, row: dict[str, Any], earlier: list[dict[str, Any]]
             ) -> EpisodeState:
    """The state before the next step: every earlier step's reply fed to the environment (only
    steps it read: a failed call or a view without pixels ends the episode)."""
    replies = [step["response"] for step in earlier if step["status"] == "ok"]
    return environment.play(sample, replies, reference=row["reference"])


@dataclass(frozen=True)
class Shown:
    """What a step shows, or why it cannot be shown."""

    view: View | None
    prompt: str | None
    image: ImagePart | None
    problem: str | None
    """image_error or environment_crash, with `message`."""
    message: str | None = None


def shown(corpus: Path | str, sample: Sample, row: dict[str, Any], state: EpisodeState,
          with_image: bool = True) -> Shown:
    """The step at `state`: MCQA, the current view with the package's multiple-choice text;
    OEG, the first view with its question alone (and the help sentence with --hint)."""
    try:
        view = environment.view(sample, state, hint=row["hint"] and row["mode"] == "mcqa")
    except EnvironmentCrash as exc:
        return Shown(None, None, None, "environment_crash", str(exc))
    prompt = view.prompt if row["mode"] == "mcqa" else oeg_question(sample, row["hint"])
    if view.empty:
        return Shown(view, prompt, None, "image_error",
                     f"the crop {view.crop} of {view.image} has no pixels")
    if not with_image:
        return Shown(view, prompt, None, None)
    data, _ = image_bytes(corpus, view)
    return Shown(view, prompt, ImagePart.of(data), None)


def step_record(sample: dict[str, Any], entry: Sample, state: EpisodeState, view: Shown,
                sent: str | None, outcome: ChatOutcome | None, model: str, sample_index: int,
                step: int) -> StepRow:
    """The steps row of one step: what it showed (`sent`: the image's hash), the reply and
    the environment's reading of it; `final` when the episode ends there."""
    row: dict[str, Any] = dict(
        dataset=sample["dataset"], sample_id=sample["sample_id"], step=step,
        sample_index=sample_index, model=model,
        image=view.view.image if view.view else None, image_sha256=sent,
        crop=list(view.view.crop) if view.view and view.view.crop else None,
        options=list(view.view.options) if view.view and sample["mode"] == "mcqa" else [],
        prompt=view.prompt, response=None, action_evaluation=None,
        category_evaluation=None, final=True, stop_reason=None, correct_prediction=None,
        num_turns=None, finish_reason=None, prompt_tokens=None, completion_tokens=None,
        latency_s=None, attempts=0, request_key=None)
    if outcome is None:
        assert view.problem is not None
        row.update(status=view.problem, message=view.message, stop_reason=view.problem)
        if view.problem == "image_error":  # ends where it stands, as upstream's script
            row.update(correct_prediction=False, num_turns=state.num_turns)
        return StepRow(**row)
    row.update(status=outcome.status, message=outcome.error, response=outcome.content,
               finish_reason=outcome.finish_reason, prompt_tokens=outcome.prompt_tokens,
               completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
               attempts=outcome.attempts, request_key=outcome.request_key)
    if not outcome.ok:  # a failed call is never the model's answer: the episode stops
        row.update(stop_reason=outcome.status)
        return StepRow(**row)
    if sample["mode"] == "oeg":
        row.update(stop_reason="answered")
        return StepRow(**row)
    try:
        after = environment.step(entry, state, outcome.content or "")
    except EnvironmentCrash as exc:
        row.update(status="environment_crash", message=str(exc),
                   stop_reason="environment_crash")
        return StepRow(**row)
    turn = after.turns[-1]
    row.update(action_evaluation=turn.action_evaluation,
               category_evaluation=turn.category_evaluation, final=after.stop)
    if after.stop:
        row.update(stop_reason=environment.stop_reason(after),
                   correct_prediction=after.correct_prediction, num_turns=after.num_turns)
    return StepRow(**row)
