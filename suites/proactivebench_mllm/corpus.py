"""Reading a corpus folder in the package's own layout: `<Dataset>_preprocessed.jsonl` per
dataset, beside the images. Samples are selected as the package's loader selects them
(data_utils.py:8-51): the id in FILTER, and not `strong_occlusions` false; file order kept."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from ...common.errors import CorpusError, UserError
from .datasets import Dataset
from .environment import start, view
from .environment.rules import ROD_CORRUPT
from .sample import Crop, EnvironmentCrash, Sample

COMMON = ("id", "image_template", "first_image", "num_images", "reference_image", "prompt",
          "options", "categories", "answer")
EXTRA = {
    "VSOD": ("strong_occlusions",),
    "MVP-N": ("valid_images",),
    "IN-C": ("quality_answer",),
    "CIT": ("step_size", "max_steps"),
    "COCO": ("direction", "granularity", "horizontal_step", "vertical_step", "crop"),
}
_INT_FIELDS = {"id", "first_image", "num_images", "reference_image", "step_size", "max_steps",
               "granularity"}
_NUMBER_FIELDS = {"horizontal_step", "vertical_step"}
_TEXT_FIELDS = {"image_template", "prompt", "answer", "quality_answer", "direction"}
_LIST_FIELDS = {"options", "categories"}
_CROP_KEYS = ("top", "left", "height", "width")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _field_problem(name: str, value: Any) -> str | None:
    if name in _INT_FIELDS and not _is_int(value):
        return "is not an integer"
    if name in _NUMBER_FIELDS and not (_is_int(value) or isinstance(value, float)):
        return "is not a number"
    if name in _TEXT_FIELDS and not isinstance(value, str):
        return "is not a string"
    if name in _LIST_FIELDS and not (isinstance(value, list) and value
                                     and all(isinstance(v, str) for v in value)):
        return "is not a non-empty list of strings"
    if name == "valid_images" and not (isinstance(value, list)
                                       and all(_is_int(v) for v in value)):
        return "is not a list of integers"
    if name == "strong_occlusions" and not isinstance(value, bool):
        return "is not true or false"
    if name == "crop" and not (isinstance(value, dict) and all(
            k in value and (_is_int(value[k]) or isinstance(value[k], float))
            for k in _CROP_KEYS)):
        return "needs numbers top, left, height and width"
    return None


def _template_problem(short: str, template: str) -> str | None:
    if short == "COCO":
        return None
    # The value types the package formats with (ROD an int, the zero-padded ones a str...).
    values: dict[str, dict[str, object]] = {
        "ROD": {"image": 0}, "VSOD": {"image": "0000"}, "QD": {"image": "0000"},
        "CIT": {"image": "0"}, "IN-C": {"level": 1},
        "MVP-N": {"informative": 0, "image": "0000"}}
    try:
        template.format(**values[short])
    except (KeyError, IndexError, ValueError) as exc:
        return f"is not a template of the dataset's fields ({type(exc).__name__}: {exc})"
    return None


def parse_entry(entry: Any, data: Dataset, where: str, line: int) -> Sample:
    """One line's entry as a Sample, every field checked (one-line CorpusError naming file,
    line and field)."""
    def fail(problem: str) -> CorpusError:
        return CorpusError(where, line, problem)

    if not isinstance(entry, dict):
        raise fail("is not a JSON object")
    for name in COMMON + EXTRA.get(data.short, ()):
        if name not in entry:
            raise fail(f"field {name!r} is missing")
        problem = _field_problem(name, entry[name])
        if problem:
            raise fail(f"field {name!r} {problem}")
    if entry["answer"] not in entry["categories"]:
        raise fail(f"field 'answer' {entry['answer']!r} is not one of 'categories'")
    if entry["num_images"] < 1:
        raise fail("field 'num_images' is below 1")
    problem = _template_problem(data.short, entry["image_template"])
    if problem:
        raise fail(f"field 'image_template' {problem}")
    if data.short == "IN-C" and entry["quality_answer"] not in entry["options"]:
        raise fail("field 'quality_answer' is not one of 'options'")
    crop = entry.get("crop")
    return Sample(
        dataset=data.short, sample_id=entry["id"], image_template=entry["image_template"],
        first_image=entry["first_image"], num_images=entry["num_images"],
        reference_image=entry["reference_image"], prompt=entry["prompt"],
        options=tuple(entry["options"]), categories=tuple(entry["categories"]),
        answer=entry["answer"], valid_images=tuple(entry.get("valid_images") or ()),
        quality_answer=entry.get("quality_answer"), step_size=entry.get("step_size", 0),
        cit_max_steps=entry.get("max_steps", 0), direction=entry.get("direction", ""),
        granularity=entry.get("granularity", 0),
        horizontal_step=entry.get("horizontal_step", 0),
        vertical_step=entry.get("vertical_step", 0),
        crop=Crop(**{k: crop[k] for k in _CROP_KEYS}) if crop is not None else None, line=line)


def read_dataset(folder: Path | str, data: Dataset,
                 keep_ids: Mapping[str, Collection[int]] | None = None) -> list[Sample]:
    """The selected samples of one dataset, in file order. `keep_ids` is the package's FILTER
    (by full dataset name); None keeps every id (a corpus of one's own)."""
    path = Path(folder) / data.file_name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path} does not exist: the corpus folder must hold "
                        f"{data.file_name} (the package's layout)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    wanted = None if keep_ids is None else keep_ids.get(data.full, ())
    samples: list[Sample] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CorpusError(str(path), number, f"is not JSON ({exc.msg})") from None
        # The loader selects before it reads anything else (data_utils.py:22-44): an entry it
        # skips is never checked, so neither is it here. A `strong_occlusions` equal to False,
        # by ==, so 0 too, is skipped.
        if isinstance(entry, dict):
            if "strong_occlusions" in entry and entry["strong_occlusions"] == False:  # noqa: E712
                continue
            if wanted is not None and entry.get("id") not in wanted:
                continue
        samples.append(parse_entry(entry, data, str(path), number))
    return samples


def read_corpus(folder: Path | str, datasets: tuple[Dataset, ...],
                keep_ids: Mapping[str, Collection[int]] | None = None
                ) -> dict[str, list[Sample]]:
    """The selected samples per short dataset name."""
    return {d.short: read_dataset(folder, d, keep_ids) for d in datasets}


def check_every_image(folder: Path | str, samples: list[Sample]) -> None:
    """Every image a step of these samples can show decodes, before any call is paid for: each
    file its template can name (the template's fields as wildcards: a superset of the views an
    episode reaches, whatever the replies). A truncated or corrupt file is a one-line error
    naming it, instead of a run that dies midway or a model scored on half a picture."""
    from PIL import Image

    paths: set[Path] = set()
    for sample in samples:
        pattern = re.sub(r"\{[^}]*\}", "*", sample.image_template)
        paths.update(Path(folder).glob(pattern))
    for path in sorted(paths):
        if ROD_CORRUPT in str(path):
            continue  # the frame upstream knows to be corrupt: the environment never shows it
        try:
            with Image.open(path) as image:
                image.load()
        except (OSError, ValueError, SyntaxError) as exc:
            raise UserError(f"cannot decode the image {path} ({exc}): every image a run can "
                            "show is checked before the first call; replace or remove it") \
                from None


def check_first_images(folder: Path | str, samples: list[Sample]) -> None:
    """Every sample's first image (and reference image) exists, before any call is paid for:
    a wrong --corpus folder fails in one line."""
    missing: list[str] = []
    for sample in samples:
        for reference in (False, True):
            try:
                shown = view(sample, start(sample, reference))
            except EnvironmentCrash:
                continue  # the episode itself reports it
            if not (Path(folder) / shown.image).is_file():
                missing.append(shown.image)
    if missing:
        raise UserError(f"{len(missing)} image(s) missing under {folder}, e.g. {missing[0]}: "
                        "is it the corpus folder, with the images beside the .jsonl files?")
