"""The per-dataset rules of the package's environments as pure functions of a sample and a
state: which image a step shows, which options are valid and accepted, where an action leads.
References are to the package's environment.py."""

from __future__ import annotations

from ..sample import (DOWN, LEFT, REWIND, RIGHT, UP, ZOOM, EnvironmentCrash, Sample)
from .state import EpisodeState

ROD_CORRUPT = "natural_bluebl_greenr-banana-s6"
CIT_REWIND = "Rewind the video."
CIT_WAIT = "Wait for the"
COCO_FARTHER = "Move farther from the object."
COCO_HORIZONTAL = ("Move the camera to the left.", "Move the camera to the right.")
COCO_VERTICAL = ("Move the camera up.", "Move the camera down.")


def relative_image(sample: Sample, state: EpisodeState) -> str:
    """The image path relative to the corpus (each subclass's _get_relative_image_path)."""
    image_id = sample.reference_image if state.reference else state.image_id
    template, short = sample.image_template, sample.dataset
    if short == "ROD":
        path = template.format(image=image_id)
        # One corrupted frame is swapped for a neighbour, by the last action (611-617); only
        # outside reference mode (get_state applies _fix_corruptions there only). Upstream
        # replaces "s6" in the absolute path, data folder included; here in the relative one.
        if not state.reference and ROD_CORRUPT in path:
            return path.replace("s6", "s5" if state.action == LEFT else "s7")
        return path
    if short in ("VSOD", "QD"):
        return template.format(image=str(image_id).zfill(4))
    if short == "MVP-N":
        informative = int(state.num_turns + 1 == sample.num_images) or int(state.reference)
        return template.format(informative=informative, image=str(image_id).zfill(4))
    if short == "IN-C":
        return template.format(level=image_id)
    if short == "CIT":
        return template.format(image=str(image_id))
    return template  # COCO: never formatted


def _cit_at_start(sample: Sample, state: EpisodeState) -> bool:
    return state.image_id - sample.step_size < 0


def _cit_at_end(sample: Sample, state: EpisodeState) -> bool:
    return state.image_id + sample.step_size >= sample.num_images


def _without_first_wait(options: list[str]) -> list[str]:
    # Quirk kept (1067-1070): with no "Wait for the" option the loop's index stays on the last
    # entry, which is removed instead.
    index = next((i for i, o in enumerate(options) if CIT_WAIT in o), len(options) - 1)
    if index < 0:
        raise EnvironmentCrash("ChangeIt: no option left to remove at the video's end")
    return options[:index] + options[index + 1:]


def _without(options: list[str], text: str, why: str) -> list[str]:
    if text not in options:
        raise EnvironmentCrash(f"{why}: {text!r} is not among {options}")
    index = options.index(text)
    return options[:index] + options[index + 1:]


def _coco_drop(sample: Sample, state: EpisodeState, options: list[str]) -> list[str]:
    if sample.direction == "zoom":
        if state.horizontal_step == sample.max_horizontal_step:
            if state.vertical_step != sample.max_vertical_step:
                raise EnvironmentCrash("coco2014: zoom steps out of step with each other")
            return _without(options, COCO_FARTHER, "coco2014 at the zoom limit")
        return options
    # Each option's first occurrence only, as list.remove (1229-1240).
    dropped = ((COCO_HORIZONTAL if state.horizontal_step >= sample.max_horizontal_step else ())
               + (COCO_VERTICAL if state.vertical_step >= sample.max_vertical_step else ()))
    for text in dropped:
        if text in options:
            options = _without(options, text, "coco2014")
    return options


def valid_options(sample: Sample, state: EpisodeState) -> list[str]:
    """The options shown before the categories (_get_valid_options)."""
    options = list(sample.options)
    if sample.dataset == "CIT":
        if _cit_at_start(sample, state):
            return _without(options, CIT_REWIND, "ChangeIt at the video's start")
        if _cit_at_end(sample, state):
            return _without_first_wait(options)
    if sample.dataset == "COCO":
        return _coco_drop(sample, state, options)
    return options


def cit_answers_shared(sample: Sample, state: EpisodeState) -> bool:
    """True where ChangeIt's _get_correct_options_and_categories returns the environment's own
    list of accepted options rather than a copy (1117-1119), so that the OEG answers method,
    which appends to it, grows that list at every call."""
    return not state.reference and not _cit_at_start(sample, state) and not _cit_at_end(
        sample, state)


def accepted_answers(sample: Sample, state: EpisodeState) -> tuple[list[str], list[str]]:
    """The options and categories that count as correct at this step
    (_get_correct_options_and_categories)."""
    accepted = list(sample.accepted_options)
    categories = [sample.answer]
    short = sample.dataset
    if state.reference and short != "COCO":
        return [], categories
    if short == "ROD":
        # The first step accepts only actions: the right category there is wrong (625-634).
        return (accepted, []) if state.action is None else (accepted, categories)
    if short in ("MVP-N", "IN-C", "QD"):
        if state.num_turns + 1 < sample.num_images:
            return accepted, categories
        if state.num_turns + 1 == sample.num_images:
            return [], categories
        raise EnvironmentCrash(f"{short}: turn {state.num_turns} beyond {sample.num_images} "
                               "images")
    if short == "CIT":
        if _cit_at_start(sample, state):
            return _without(accepted, CIT_REWIND, "ChangeIt at the video's start"), categories
        if _cit_at_end(sample, state):
            return _without_first_wait(accepted), categories
        return accepted, categories
    if short == "COCO":
        # Quirk kept: reference mode falls through to the direction branch (1291-1296).
        return _coco_drop(sample, state, accepted), categories
    return accepted, categories  # VSOD


def crop_box(sample: Sample, state: EpisodeState) -> tuple[float, float, float, float] | None:
    """COCO's PIL crop box (left, top, right, bottom) at this step, None for the identity
    (1248-1280). Quirk kept: outside zoom, width and height are used as the right and bottom
    coordinates themselves."""
    if sample.dataset != "COCO" or state.reference or sample.crop is None:
        return None
    crop, d = sample.crop, sample.direction
    h, v = state.horizontal_step, state.vertical_step
    top = crop.top - v if ("up" in d or "zoom" in d) else crop.top
    left = crop.left - h if ("left" in d or "zoom" in d) else crop.left
    bottom = crop.height + v if ("down" in d or "zoom" in d) else crop.height
    right = crop.width + h if ("right" in d or "zoom" in d) else crop.width
    if d == "zoom":
        bottom += crop.top
        right += crop.left
    if right < left or bottom < top:
        # PIL refuses such a box, and the package loads the image outside its try (mcqa.py:95).
        raise EnvironmentCrash(f"coco2014: crop box {(left, top, right, bottom)} is inverted")
    return (left, top, right, bottom)


def next_position(sample: Sample, state: EpisodeState, action: int,
                  num_turns: int) -> dict[str, int | float]:
    """The fields of the state that an action changes (_prepare_next_state); `num_turns`
    already counts the reply that chose it."""
    short, image_id = sample.dataset, state.image_id
    if short in ("ROD", "VSOD"):
        back = LEFT if short == "ROD" else REWIND
        return {"image_id": (image_id - 1 if action == back else image_id + 1)
                % sample.num_images}
    if short == "MVP-N":
        ids = sample.valid_images or tuple(range(sample.num_images))
        if num_turns >= len(ids):
            raise EnvironmentCrash(f"MVP-N: no valid image for turn {num_turns}")
        return {"image_id": ids[num_turns]}
    if short == "IN-C":
        return {"image_id": image_id - 1}
    if short == "QD":
        return {"image_id": image_id + 1}
    if short == "CIT":
        step = sample.step_size
        return {"image_id": image_id - step if action == REWIND else image_id + step}
    h, v = state.horizontal_step, state.vertical_step
    nh, nv = state.num_horizontal_turns, state.num_vertical_turns
    if action in (LEFT, RIGHT, ZOOM):
        nh += 1
        h = h / nh * (nh + 1)
    if action in (UP, DOWN, ZOOM):
        nv += 1
        v = v / nv * (nv + 1)
    if action not in (LEFT, RIGHT, UP, DOWN, ZOOM):
        raise EnvironmentCrash(f"coco2014: action {action} is not a move")
    return {"horizontal_step": h, "vertical_step": v, "num_horizontal_turns": nh,
            "num_vertical_turns": nv}
