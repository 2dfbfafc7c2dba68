"""Each sample of the multimodal ProactiveBench as an environment: an immutable episode state
and pure transitions, so that a pipeline can drive an episode one reply at a time and rebuild
any state from the replies so far.

    state = start(sample)                 # reference=True: the unoccluded image, one step
    while not state.stop:
        shown = view(sample, state, hint) # image, crop, options, the MCQA text to send
        state = step(sample, state, reply_to(shown))
    statistics(sample, state), stop_reason(state)

The rules are the package's (proactivebench 0.1.1, environment.py), quirks included; where the
package would crash, EnvironmentCrash is raised.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from . import rules
from .replies import Evaluation, read
from ..sample import ACTION_KEYS, ROTATE, STOP, EnvironmentCrash, Sample
from .state import EpisodeState, Turn

StopReason = Literal["correct", "wrong", "unreadable", "max_steps", "image_error"]
MCQA_INTRO = " Choose from the following options. Options:\n"
MCQA_SHORT_ANSWER = "Please only return one of the options without any other words."


@dataclass(frozen=True)
class View:
    """What a step shows the model."""

    image: str
    """Image path relative to the corpus folder."""
    crop: tuple[float, float, float, float] | None
    """PIL crop box applied to the RGB image (COCO), None for the file as it is."""
    question: str
    """The question (video prefix and hint included), as the package's state["prompt"]."""
    options: tuple[str, ...]
    """The options shown: the valid actions, then the categories."""
    prompt: str
    """The full multiple-choice text sent with the image."""

    @property
    def empty(self) -> bool:
        """True when the crop has no pixels (PIL rounds the box to integers): no image to send,
        see `abandon`."""
        if self.crop is None:
            return False
        left, top, right, bottom = (int(round(c)) for c in self.crop)
        return right - left <= 0 or bottom - top <= 0


@dataclass(frozen=True)
class Reading:
    """A reply read against the valid actions and against the categories."""

    action_evaluation: Evaluation
    category_evaluation: Evaluation
    chosen_action: str
    chosen_category: str


def start(sample: Sample, reference: bool = False) -> EpisodeState:
    return EpisodeState(image_id=sample.first_image, reference=reference,
                        horizontal_step=sample.horizontal_step,
                        vertical_step=sample.vertical_step)


def mcqa_text(question: str, options: tuple[str, ...] | list[str]) -> str:
    """The package's multiple-choice template with its short-answer line (data_utils.py:54-61)."""
    lines = "".join(f"{chr(65 + i)}. {option}\n" for i, option in enumerate(options))
    return question + MCQA_INTRO + lines + MCQA_SHORT_ANSWER


def question(sample: Sample, state: EpisodeState, hint: bool = False) -> str:
    text = sample.reference_prompt if state.reference else sample.prompt
    if sample.pre_prompt:
        text = f"{sample.pre_prompt} {text}"
    return f"{text} {sample.hint}" if hint else text


def view(sample: Sample, state: EpisodeState, hint: bool = False) -> View:
    """What the step at `state` shows (get_state, 150-205)."""
    if state.reference:
        options: tuple[str, ...] = sample.categories
    else:
        options = tuple(rules.valid_options(sample, state)) + sample.categories
    asked = question(sample, state, hint)
    return View(image=rules.relative_image(sample, state), crop=rules.crop_box(sample, state),
                question=asked, options=options, prompt=mcqa_text(asked, options))


def read_reply(sample: Sample, state: EpisodeState, reply: str) -> Reading:
    """Both reads of a reply at this step (336-348)."""
    accepted, categories = rules.accepted_answers(sample, state)
    if state.reference:
        category, chosen_category = read(reply, categories, list(sample.categories), 0)
        return Reading("mismatch", category, "", chosen_category)
    valid = rules.valid_options(sample, state)
    action, chosen_action = read(reply, accepted, valid, 0)
    category, chosen_category = read(reply, categories, list(sample.categories), len(valid))
    return Reading(action, category, chosen_action, chosen_category)


def action_of(sample: Sample, option: str) -> int:
    """The action an accepted option names (_parse_action, 428-463): the first key word of the
    dataset's action space found in its lower-cased text; a second, different one is the
    package's assertion error (several ROTATE words are fine)."""
    text, space, found = option.lower(), sample.action_space, None
    for key, action in ACTION_KEYS:
        if action in space and key in text:
            if found is not None and not (found == action == ROTATE):
                raise EnvironmentCrash(f"{sample.dataset}: option {option!r} names two actions")
            found = action if found is None else found
    if found is None:
        raise EnvironmentCrash(f"{sample.dataset}: option {option!r} names no action")
    return found


def step(sample: Sample, state: EpisodeState, reply: str) -> EpisodeState:
    """The state after `reply` (evaluate_generated_answer, 328-396)."""
    if state.stop:
        raise ValueError("the episode is over")
    reading = read_reply(sample, state, reply)
    bad = ("wrong", "mismatch")
    correct = False
    action = state.action
    if reading.action_evaluation in bad and reading.category_evaluation in bad:
        action = STOP
    elif reading.category_evaluation == "correct":
        if reading.chosen_category != sample.answer:
            raise EnvironmentCrash(f"chosen category {reading.chosen_category!r} is not the "
                                   f"answer {sample.answer!r}")
        correct, action = True, STOP
    else:
        action = action_of(sample, reading.chosen_action)
    assert action is not None
    num_turns = state.num_turns + 1
    turn = Turn(reply, reading.action_evaluation, reading.category_evaluation,
                state.image_id, action)
    if num_turns == sample.max_steps:
        action = STOP
    changes: dict[str, Any] = {}
    if action != STOP:
        changes = rules.next_position(sample, state, action, num_turns)
        image_id = changes.get("image_id", state.image_id)
        if image_id not in sample.image_ids:
            raise EnvironmentCrash(f"{sample.dataset}: image {image_id} is not among "
                                   f"{list(sample.image_ids)}")
    return replace(state, **changes, num_turns=num_turns, action=action, stop=action == STOP,
                   correct_prediction=correct, turns=state.turns + (turn,))


def play(sample: Sample, replies: list[str], reference: bool = False) -> EpisodeState:
    """The state after the replies, in order (a resumed episode)."""
    state = start(sample, reference)
    for reply in replies:
        state = step(sample, state, reply)
    return state


def abandon(state: EpisodeState) -> EpisodeState:
    """The episode ended where it stands because its image cannot be shown (View.empty), as the
    package's script breaks out of it on a processor error."""
    return replace(state, stop=True, abandoned=True)


def stop_reason(state: EpisodeState) -> StopReason | None:
    """Why the episode ended: the right category; a wrong (or unreadable: neither read found
    anything) reply; the step limit reached after an accepted action; or an image that could
    not be shown."""
    if not state.stop:
        return None
    if state.abandoned:
        return "image_error"
    if state.correct_prediction:
        return "correct"
    last = state.turns[-1]
    if last.action_evaluation == "correct":
        return "max_steps"
    if last.action_evaluation == last.category_evaluation == "mismatch":
        return "unreadable"
    return "wrong"


def statistics(sample: Sample, state: EpisodeState) -> dict[str, Any]:
    """The package's get_statistics() (398-408)."""
    return {
        "num_turns": state.num_turns,
        "generated_answers": [t.reply for t in state.turns],
        "action_evaluations": [t.action_evaluation for t in state.turns],
        "category_evaluations": [t.category_evaluation for t in state.turns],
        "correct_prediction": state.correct_prediction,
        "image_id_history": [t.image_id for t in state.turns],
        "action_history": [t.action for t in state.turns],
        "max_steps": state.num_turns == sample.max_steps,
    }
