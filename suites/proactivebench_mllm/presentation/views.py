"""What the viewer shows of an episode (suites/base.py `sample_views`): its steps in order, each
with the exact image the model saw (the environment's crop included), the options, the reply,
both readings and the stop reason; OEG with the judge's reply.

The image is made again from the corpus as the run made it (images.image_bytes) and shown only
when its sha256 is the one the step recorded as sent; it is written once, named by that hash,
beside the viewer's page. The corpus folder of each revision is noted in the store when a run
locates it (`note_corpus_folder`), so the viewer finds it without the run's flags.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from ....cache.artifacts import ArtifactStore, write_atomic
from ....cache.keys import content_key
from ...declarations import SampleView, ViewColumn, ViewSpec
from ...views import Viewed, evaluation_tables, facts, heading, table, text
from ..environment import View
from ..environment.images import MEDIA_TYPES, image_bytes

OUTCOMES = {"correct": "good", "wrong": "bad", "right category": "good", "proactive": "mid",
            "neither": "bad"}
SPEC = ViewSpec((ViewColumn("dataset", "70px", filter=True), ViewColumn("sample", "60px"),
                 ViewColumn("answer", "26%")), outcome_name="outcome", outcomes=OUTCOMES)
EXTENSIONS = {media: f".{kind.lower()}".replace(".jpeg", ".jpg")
              for kind, media in MEDIA_TYPES.items()}


def _note(store: ArtifactStore, revision: str) -> Path:
    return store.local_dir("corpora") / "located" / f"{content_key(revision)[:32]}.json"


def note_corpus_folder(store: ArtifactStore, revision: str, folder: Path) -> None:
    """Remember where the corpus of `revision` is, for the viewer (a local note: the images
    are read from there, never copied into the store)."""
    note = _note(store, revision)
    if note.exists():
        try:
            if json.loads(note.read_text(encoding="utf-8")).get("folder") == str(folder):
                return
        except (OSError, ValueError):
            pass
    note.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(note, json.dumps({"revision": revision, "folder": str(folder)}).encode())


def corpus_folder(store: ArtifactStore, revision: str) -> Path | None:
    try:
        folder = Path(json.loads(_note(store, revision).read_text(encoding="utf-8"))["folder"])
    except (OSError, ValueError, KeyError):
        return None
    return folder if folder.is_dir() else None


def _outcome(row: dict[str, Any]) -> str:
    if row["status"] != "scored":
        return row["status"]
    if row["mode"] == "mcqa":
        return "correct" if row["correct_prediction"] else "wrong"
    if row["cp"]:
        return "right category"
    return "proactive" if row["ps"] else "neither"


class _Images:
    """The image of each step, made once per (file, crop) in one listing."""

    def __init__(self, folder: Path | None):
        self.folder = folder
        self.made: dict[tuple[str, tuple[float, ...] | None], tuple[str, bytes] | str] = {}

    def of(self, step: dict[str, Any]) -> tuple[str, bytes] | str:
        """(file name, bytes), or why the image cannot be shown."""
        if not step["image"]:
            return "no image was sent at this step"
        if self.folder is None:
            return "the corpus folder of this run is not found here: run once with its --corpus"
        crop = tuple(step["crop"]) if step["crop"] else None
        key = (step["image"], crop)
        if key not in self.made:
            view = View(image=step["image"], crop=crop,
                        question="", options=(), prompt="")
            try:
                data, media_type = image_bytes(self.folder, view)
            except Exception as exc:  # noqa: BLE001 - shown on the page, never raised
                self.made[key] = f"the image cannot be made again: {exc}"
            else:
                import hashlib

                digest = hashlib.sha256(data).hexdigest()
                self.made[key] = (digest + EXTENSIONS.get(media_type, ".png"), data) \
                    if digest == step["image_sha256"] else \
                    "the corpus's image differs from the one sent (sha256 mismatch)"
        return self.made[key]


def sample_views(suite: Viewed, store: ArtifactStore, judgments_key: str
                  ) -> Iterator[SampleView]:
    samples, steps, outcomes = evaluation_tables(suite, store, judgments_key)
    entries = {(r["dataset"], r["sample_id"]): r for r in samples.iter_rows(named=True)}
    revision = samples["corpus_revision"][0] if samples.height else ""
    images = _Images(corpus_folder(store, revision) if revision else None)
    by_sample: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for step in steps.sort("dataset", "sample_id", "step").iter_rows(named=True):
        by_sample.setdefault((step["dataset"], step["sample_id"]), []).append(step)
    for final in outcomes.filter(outcomes["final"]).iter_rows(named=True):
        key = (final["dataset"], final["sample_id"])
        entry = entries.get(key) or {}
        blocks: list[dict[str, Any]] = [facts(
            ("stop reason", final["stop_reason"]), ("steps", len(by_sample.get(key, []))),
            ("num_turns", final["num_turns"]), ("ps", final["ps"]), ("cp", final["cp"]),
            ("agg", final["agg"]), ("message", final["message"]))]
        files: dict[str, Any] = {}
        for step in by_sample.get(key, []):
            blocks.append(heading(f"step {step['step']}" + (" (final)" if step["final"] else "")))
            found = images.of(step)
            if isinstance(found, tuple):
                files[found[0]] = found[1]
                caption = step["image"] + (f" cropped to {[round(c, 1) for c in step['crop']]}"
                                           if step["crop"] else "")
                blocks.append({"t": "image", "src": found[0], "caption": caption})
            else:
                blocks.append(text("image", found))
            if step["options"]:
                blocks.append(table(["option"], [[o] for o in step["options"]]))
            blocks += [text("reply", step["response"]),
                       facts(("status", step["status"]), ("action read", step["action_evaluation"]),
                             ("category read", step["category_evaluation"]),
                             ("stop reason", step["stop_reason"]), ("message", step["message"]))]
        if final["mode"] == "oeg":
            blocks.append(text("judge's reply", final["judge_output"]))
        yield SampleView(
            sample=f"{key[0]}:{key[1]}", cells=(key[0], str(key[1]), str(entry.get("answer"))),
            outcome=_outcome(final), files=files, sample_index=int(final["sample_index"]),
            shared=[facts(("answer", entry.get("answer")), ("max steps", entry.get("max_steps")),
                          ("acceptable answers (OEG)", entry.get("oeg_answers")))],
            result=blocks)
