"""An episode driven one stored step at a time: the sample rebuilt from its row, its state
replayed from the replies so far (never stored), and what the next step shows."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...content import ImagePart
from . import environment
from .environment import EpisodeState, View
from .images import image_bytes
from .oeg import oeg_question
from .sample import Crop, EnvironmentCrash, Sample


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
