"""Where an episode of the multimodal ProactiveBench stands: the state the environment's rules
(rules.py) read and its transitions (environment.py) build."""

from __future__ import annotations

from dataclasses import dataclass

from .replies import Evaluation


@dataclass(frozen=True)
class Turn:
    """One reply and how the environment took it."""

    reply: str
    action_evaluation: Evaluation
    category_evaluation: Evaluation
    image_id: int
    """The image id shown at this step."""
    action: int
    """The action the reply led to (0 = stop), before the step limit is applied."""


@dataclass(frozen=True)
class EpisodeState:
    """Where an episode stands; built by `start`, advanced by `step`."""

    image_id: int
    reference: bool = False
    """Reference mode: the unoccluded reference image, categories only, one step."""
    num_turns: int = 0
    action: int | None = None
    """The last action taken (None before the first reply): ROD's first step and corrupted
    frame depend on it."""
    horizontal_step: int | float = 0
    vertical_step: int | float = 0
    num_horizontal_turns: int = 0
    num_vertical_turns: int = 0
    stop: bool = False
    correct_prediction: bool = False
    abandoned: bool = False
    """The step's image could not be shown (an empty COCO crop): the package's script ends the
    episode where it stands, counted as not correct (mcqa.py:97-106)."""
    turns: tuple[Turn, ...] = ()
