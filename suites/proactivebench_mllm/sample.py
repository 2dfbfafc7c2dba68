"""One corpus entry as an immutable value, and the per-dataset constants the package derives
from it when it builds an environment (environment.py:50-145 and each subclass's __init__)."""

from __future__ import annotations

from dataclasses import dataclass, field

# The package's action numbers (environment.py:7-24), kept so that histories compare as they are.
STOP, LEFT, RIGHT, REWIND, FORWARD, ROTATE = 0, 1, 2, 3, 4, 5
BRIGHTNESS, CONTRAST, SATURATE, BLUR, NOISE, JPEG_COMPRESSION, PIXELATE, ARTIFACTS = range(6, 14)
DETAILS, UP, DOWN, ZOOM = 14, 15, 16, 17

# Option key words and their actions, in the package's order: the first key found in the
# chosen option's text decides, within the dataset's action space.
ACTION_KEYS: tuple[tuple[str, int], ...] = (
    ("to the left", LEFT), ("to the right", RIGHT), ("rewind the video.", REWIND),
    ("wait for the", FORWARD), ("rotate", ROTATE), ("view", ROTATE), ("angle", ROTATE),
    ("orientation", ROTATE), ("different", ROTATE), ("brightness", BRIGHTNESS),
    ("contrast", CONTRAST), ("saturation", SATURATE), ("deblur", BLUR), ("denoise", NOISE),
    ("compression", JPEG_COMPRESSION), ("resolution", PIXELATE), ("artifacts", ARTIFACTS),
    ("details", DETAILS), ("quickdraw", DETAILS), ("drawing", DETAILS), ("sketch", DETAILS),
    ("up", UP), ("down", DOWN), ("farther", ZOOM),
)

VIDEO_PREFIX = "This is a frame extracted from a video. Answer the following question."
HINTS = {
    "ROD": "Hint: moving the occluding object might reveal what is behind it.",
    "VSOD": "Hint: If there is an occlusion, waiting for it to disappear or rewinding the video "
            "might reveal what's behind it.",
    "MVP-N": "Hint: rotating the object could provide a more informative view.",
    "IN-C": "Hint: enhancing the image quality could help with classification.",
    "QD": "Hint: Adding more details to the quickdraw could help with classification.",
    "CIT": "Hint: If you cannot answer the question, waiting for it to appear or rewinding the "
           "video could help with classification.",
}
COCO_ZOOM_HINT = "Hint: zooming out could help with classification."
COCO_MOVE_HINT = "Hint: moving the camera could help with classification."
ROD_REFERENCE_PROMPT = "What type of object is in the image?"
IN_C_LEVELS = (1, 2, 3, 4, 5)


class EnvironmentCrash(Exception):
    """The genuine package fails an assertion or raises here, so the sample cannot be run as
    upstream runs it (e.g. a chosen option naming two actions, a step outside the images)."""


@dataclass(frozen=True)
class Crop:
    """COCO's crop as the entry gives it (width and height are not always sizes: see
    rules.crop_box)."""

    top: int | float
    left: int | float
    height: int | float
    width: int | float


@dataclass(frozen=True)
class Sample:
    """A corpus entry of one dataset; fields as the package's entry keys."""

    dataset: str
    """Short dataset name (ROD, VSOD, MVP-N, IN-C, QD, CIT, COCO)."""
    sample_id: int
    """The entry's `id` (the key of the package's FILTER)."""
    image_template: str
    """Image path relative to the corpus, a str.format template (COCO: used as is)."""
    first_image: int
    """The image id of the first step."""
    num_images: int
    """Images (levels, frames, views) of the sample; the step limit except for CIT and COCO."""
    reference_image: int
    """The unoccluded image's id (reference mode)."""
    prompt: str
    """The question, before the video prefix and the hint."""
    options: tuple[str, ...]
    """The entry's interaction options, in file order."""
    categories: tuple[str, ...]
    """The categories shown after the options."""
    answer: str
    """The right category."""
    valid_images: tuple[int, ...] = ()
    """MVP-N: the image ids in visiting order."""
    quality_answer: str | None = None
    """IN-C: the one accepted option."""
    step_size: int = 0
    """CIT: frames per rewind/wait."""
    cit_max_steps: int = 0
    """CIT: the entry's own step limit."""
    direction: str = ""
    """COCO: zoom, left, right, up, down or two joined by "_"."""
    granularity: int = 0
    """COCO: moves per direction (zoom: one more)."""
    horizontal_step: int | float = 0
    """COCO: pixels per horizontal move, already applied once at the first step."""
    vertical_step: int | float = 0
    """COCO: pixels per vertical move."""
    crop: Crop | None = None
    """COCO: the first crop, before the first step is applied."""
    line: int = field(default=0, compare=False)
    """Line of the corpus file the entry came from (for messages)."""

    @property
    def accepted_options(self) -> tuple[str, ...]:
        """Options the model may choose to act (environment.py:519-525, IN-C 869)."""
        if self.dataset == "IN-C":
            return tuple(o for o in self.options if o == self.quality_answer)[:1]
        return tuple(o for o in self.options
                     if "cannot" not in o.lower() and "do not" not in o.lower())

    @property
    def action_space(self) -> frozenset[int]:
        spaces = {"ROD": {LEFT, RIGHT}, "VSOD": {REWIND, FORWARD}, "MVP-N": {ROTATE},
                  "IN-C": set(range(BRIGHTNESS, ARTIFACTS + 1)), "QD": {DETAILS},
                  "CIT": {REWIND, FORWARD}}
        if self.dataset != "COCO":
            return frozenset(spaces[self.dataset] | {STOP})
        if "zoom" in self.direction:
            return frozenset({STOP, ZOOM})
        named = {"up": UP, "down": DOWN, "left": LEFT, "right": RIGHT}
        return frozenset({STOP} | {a for word, a in named.items() if word in self.direction})

    @property
    def max_steps(self) -> int:
        if self.dataset == "CIT":
            return self.cit_max_steps
        if self.dataset == "COCO":
            if "zoom" in self.direction:
                return self.granularity + 1
            return self.granularity if "_" not in self.direction else self.granularity * 2
        return self.num_images

    @property
    def max_horizontal_step(self) -> int | float:
        if self.dataset != "COCO":
            return 0
        if "zoom" in self.direction:
            return self.horizontal_step * (self.granularity + 1)
        if "left" in self.direction or "right" in self.direction:
            return self.horizontal_step * self.granularity
        return 0

    @property
    def max_vertical_step(self) -> int | float:
        if self.dataset != "COCO":
            return 0
        if "zoom" in self.direction:
            return self.vertical_step * (self.granularity + 1)
        if "up" in self.direction or "down" in self.direction:
            return self.vertical_step * self.granularity
        return 0

    @property
    def image_ids(self) -> tuple[int, ...]:
        """The ids a step may reach (environment.py:71; IN-C 864), asserted after each move."""
        if self.dataset == "IN-C":
            return IN_C_LEVELS
        if self.dataset == "MVP-N" and self.valid_images:
            return self.valid_images
        return tuple(range(self.num_images))

    @property
    def hint(self) -> str:
        if self.dataset == "COCO":
            return COCO_ZOOM_HINT if "zoom" in self.direction else COCO_MOVE_HINT
        return HINTS[self.dataset]

    @property
    def pre_prompt(self) -> str:
        return VIDEO_PREFIX if self.dataset in ("VSOD", "CIT") else ""

    @property
    def reference_prompt(self) -> str:
        return ROD_REFERENCE_PROMPT if self.dataset == "ROD" else self.prompt
