"""A corpus in the multimodal ProactiveBench's own layout, generated at test time: every
dataset, small PIL-drawn images, and entries that exercise the package's quirks (ROD's corrupted
frame, ChangeIt's boundary options, COCO crops beyond the image, an IN-C episode that steps
outside its levels, a QuickDraw option naming two actions...). Deterministic for a seed."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from PIL import Image, ImageDraw

FULL = {"ROD": "Realistic-Occlusion-Dataset", "VSOD": "OcclusionDataSet-MM20", "MVP-N": "MVP-N",
        "IN-C": "ImageNet-C", "QD": "QuickDraw", "CIT": "ChangeIt", "COCO": "coco2014"}
CATEGORIES = ["apple", "banana", "kettle", "mug", "guitar", "ladder", "lamp", "teapot",
              "scissors", "violin", "umbrella", "anchor", "cup", "kite"]
CANNOT = ["I cannot answer.", "I do not know."]
QUALITY = ["Increase the brightness.", "Increase the contrast.", "Increase the saturation.",
           "Deblur the image.", "Denoise the image.", "Remove the compression artifacts.",
           "Increase the resolution."]
COCO_MOVES = {"left": "Move the camera to the left.", "right": "Move the camera to the right.",
              "up": "Move the camera up.", "down": "Move the camera down."}


def draw(path: Path, rng: random.Random, size: tuple[int, int] | None = None) -> None:
    """A small image with a few coloured shapes (PNG, or JPEG by the file's suffix)."""
    width, height = size or (rng.randint(24, 64), rng.randint(24, 64))
    image = Image.new("RGB", (width, height), tuple(rng.randrange(256) for _ in range(3)))
    pen = ImageDraw.Draw(image)
    for _ in range(3):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        box = (x0, y0, x0 + rng.randint(2, width), y0 + rng.randint(2, height))
        colour = tuple(rng.randrange(256) for _ in range(3))
        (pen.ellipse if rng.random() < 0.5 else pen.rectangle)(box, fill=colour)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


def _categories(rng: random.Random) -> tuple[list[str], str]:
    chosen = rng.sample(CATEGORIES, rng.randint(2, 5))
    return chosen, rng.choice(chosen)


def _base(rng: random.Random, sample_id: int, template: str, first: int, count: int,
          prompt: str, options: list[str]) -> dict:
    categories, answer = _categories(rng)
    return {"id": sample_id, "image_template": template, "first_image": first,
            "num_images": count, "reference_image": rng.randrange(count), "prompt": prompt,
            "options": options, "categories": categories, "answer": answer}


def _rod(rng: random.Random, root: Path, sample_id: int, index: int) -> dict:
    options = ["Move the occluding object to the left.", "Move the occluding object to the right.",
               rng.choice(CANNOT)]
    if index == 0:  # the corrupted frame: s6 is never read, s5 or s7 instead
        count, template = 8, f"ROD/natural_bluebl_greenr-banana-s{{image}}/{sample_id}.png"
        first = 6
    else:
        count, template = rng.randint(2, 5), f"ROD/obj{sample_id}/img_{{image}}.png"
        first = rng.randrange(count)
        rng.shuffle(options)
    entry = _base(rng, sample_id, template, first, count,
                  "What type of object is behind the occluding object?", options)
    for image in range(count):
        draw(root / template.format(image=image), rng)
    return entry


def _vsod(rng: random.Random, root: Path, sample_id: int, index: int) -> dict:
    count = rng.randint(2, 6)
    template = f"VSOD/video{sample_id}/{{image}}.png"
    options = ["Wait for the occluding person to move.", "Rewind the video.", rng.choice(CANNOT)]
    rng.shuffle(options)
    entry = _base(rng, sample_id, template, rng.randrange(count), count,
                  "Which object is on the table?", options)
    entry["strong_occlusions"] = index % 3 != 1  # every third is skipped by the loader
    for image in range(count):
        draw(root / template.format(image=str(image).zfill(4)), rng)
    return entry


def _mvpn(rng: random.Random, root: Path, sample_id: int, index: int) -> dict:
    count = rng.randint(1, 4)
    ids = rng.sample(range(60), count)
    template = f"MVP-N/item{sample_id}/{{informative}}_{{image}}.png"
    options = ["Rotate the object.", rng.choice(CANNOT)]
    if index == 1:  # several ROTATE words in one option are fine
        options[0] = "Rotate the object to view it from a different angle."
    entry = _base(rng, sample_id, template, ids[0], count, "What object is this?", options)
    entry["valid_images"] = [] if index == 2 else ids
    if index == 2:
        entry["first_image"] = 0
    for image in (ids if index != 2 else range(count)):
        for informative in (0, 1):
            draw(root / template.format(informative=informative, image=str(image).zfill(4)), rng)
    entry["reference_image"] = ids[-1] if index != 2 else count - 1
    return entry


def _inc(rng: random.Random, root: Path, sample_id: int, index: int) -> dict:
    first = rng.randint(1, 5)
    count = rng.randint(1, first)
    if index == 1:  # a third move would reach level 0: the package asserts
        first, count = 2, 3
    options = rng.sample(QUALITY, rng.randint(2, 4)) + [rng.choice(CANNOT)]
    template = f"IN-C/s{sample_id}/{{level}}.png"
    entry = _base(rng, sample_id, template, first, count, "What object is in the image?",
                  options)
    entry["quality_answer"] = rng.choice(options[:-1])
    entry["reference_image"] = 0
    for level in range(0, 6):
        draw(root / template.format(level=level), rng)
    return entry


def _qd(rng: random.Random, root: Path, sample_id: int, index: int) -> dict:
    count = rng.randint(1, 4)
    template = f"QD/draw{sample_id}/{{image}}.png"
    detail = ["Provide a more detailed sketch.", "Add more details to the quickdraw."][index % 2]
    if index == 2:  # "details" and "drawing": two actions, the package asserts when chosen
        detail = "Add more details to the drawing."
    entry = _base(rng, sample_id, template, 0, count, "What is this drawing?",
                  [detail, rng.choice(CANNOT)])
    for image in range(count):
        draw(root / template.format(image=str(image).zfill(4)), rng)
    return entry


def _cit(rng: random.Random, root: Path, sample_id: int, index: int) -> dict:
    count, step = rng.randint(3, 10), rng.randint(1, 3)
    options = ["Wait for the action to happen.", "Rewind the video.", rng.choice(CANNOT)]
    rng.shuffle(options)
    first = rng.randrange(count)
    if index == 1:  # no "Wait for the" option: at the end the last option goes instead
        options = ["Rewind the video.", rng.choice(CANNOT)]
        first = count - 1
    if index == 2:  # both ends at once: only rewind is removed, waiting leaves the video
        count, step, first = 3, 2, 1
    template = f"CIT/clip{sample_id}/{{image}}.png"
    entry = _base(rng, sample_id, template, first, count, "What action is being performed?",
                  options)
    entry["categories"] = rng.sample(["tying a knot", "peeling an orange", "slicing bread",
                                      "pouring water", "Washing a car."], 3)
    entry["answer"] = rng.choice(entry["categories"])
    entry["step_size"], entry["max_steps"] = step, rng.randint(2, 5)
    for image in range(count):
        draw(root / template.format(image=image), rng)
    return entry


def _coco(rng: random.Random, root: Path, sample_id: int, index: int) -> dict:
    directions = ["zoom", "left", "right", "up", "down", "up_left", "down_right", "zoom"]
    direction = directions[index % len(directions)]
    width, height = rng.randint(60, 100), rng.randint(50, 90)
    template = f"COCO/COCO_val2014_{sample_id:012d}.png"
    draw(root / template, rng, (width, height))
    if direction == "zoom":
        options = ["Move farther from the object."]
    else:
        options = [COCO_MOVES[part] for part in direction.split("_")]
    options.append(rng.choice(CANNOT))
    entry = _base(rng, sample_id, template, 0, 1, "What object is in the image?", options)
    top, left = rng.randint(0, height // 2), rng.randint(0, width // 2)
    # Outside zoom the package takes width and height as the right and bottom coordinates;
    # entry 3 keeps sizes smaller than the offsets: an inverted box, which PIL refuses.
    as_size = direction == "zoom" or index == 3
    crop = {"top": top, "left": left,
            "height": rng.randint(8, height - top) + (0 if as_size else top),
            "width": rng.randint(8, width - left) + (0 if as_size else left)}
    # Outside zoom the first step already holds one step of the max (step x granularity):
    # granularity 1 offers no move at all.
    granularity = rng.randint(1, 3) if direction == "zoom" or index == 1 else rng.randint(2, 4)
    entry.update(direction=direction, granularity=granularity,
                 horizontal_step=rng.randint(3, 25), vertical_step=rng.randint(3, 25),
                 crop=crop)
    return entry


MAKERS = {"ROD": _rod, "VSOD": _vsod, "MVP-N": _mvpn, "IN-C": _inc, "QD": _qd, "CIT": _cit,
          "COCO": _coco}


def generate_corpus(root: Path, per_dataset: int = 8, seed: int = 0,
                    ids: Mapping[str, Sequence[int]] | None = None) -> dict[str, list[dict]]:
    """Write `<Dataset>_preprocessed.jsonl` and the images under `root` for every dataset;
    `ids` gives the sample ids per short name (e.g. taken from the package's FILTER), else
    0, 1, 2...; returns the entries per short name."""
    rng = random.Random(seed)
    written: dict[str, list[dict]] = {}
    for short, make in MAKERS.items():
        chosen = list(ids[short]) if ids is not None else list(range(per_dataset))
        entries = [make(rng, root, sample_id, index)
                   for index, sample_id in enumerate(chosen[:per_dataset])]
        (root / f"{FULL[short]}_preprocessed.jsonl").write_text(
            "".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
        written[short] = entries
    return written
