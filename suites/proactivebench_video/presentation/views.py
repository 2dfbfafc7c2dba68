"""What the viewer shows of a video sample (suites/base.py `sample_views`): a timeline of its
steps (each step's frame thumbnails, the subtitles it brought, the model's reply at its time,
marked when it falls in a gold turn's window), the gold turns (windows, answers, the replies
judged with each judge score, the turn's PAUC) and the sample's PAUC.

Frames are the store's own frame files (frames.py: `frames/<key>/frame-<k>.<ext>`), found by the
video's sha256 and the step's frame times, copied beside the page once per frame set and frame.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from ....cache.artifacts import ArtifactStore
from ...declarations import SampleView, ViewColumn, ViewSpec
from ...views import Viewed, evaluation_tables, facts, heading, table
from ..frames import MANIFEST

OUTCOMES = {"answered every turn": "good", "answered some turns": "mid", "no answer": "bad"}
SPEC = ViewSpec((ViewColumn("question", "26%"), ViewColumn("part", "50px", filter=True),
                 ViewColumn("turns", "50px")), outcome_name="outcome", outcomes=OUTCOMES)
OMEGAS = ("pauc_0", "pauc_0.5", "pauc_1")


def frame_sets(folder: Path) -> dict[str, list[tuple[str, dict[float, Path]]]]:
    """video sha256 -> (frame set key, frame time -> file) of each set stored for it."""
    found: dict[str, list[tuple[str, dict[float, Path]]]] = {}
    for manifest in sorted(folder.glob(f"*/*/{MANIFEST}")):
        try:
            content = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        times = {round(e["time"], 6): manifest.parent / e["file"] for e in content["frames"]}
        found.setdefault(content["record"]["video_sha256"], []).append(
            (manifest.parent.name, times))
    return found


def _frames_of(sets: list[tuple[str, dict[float, Path]]], times: list[float]
               ) -> list[tuple[str, Path]]:
    """(media file name, stored file) of each frame time, from the set holding all of them."""
    for key, by_time in sets:
        files = [by_time.get(round(t, 6)) for t in times]
        if all(files):
            return [(f"{key[:16]}-{path.name}", path) for path in files if path]
    return []


def _outcome(turns: list[dict[str, Any]]) -> str:
    failed = [t["status"] for t in turns if t["status"] != "scored"]
    if failed:
        return failed[0]
    answered = sum(t["final_score"] is not None for t in turns)
    return ("answered every turn" if answered == len(turns) else
            "answered some turns" if answered else "no answer")


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(100 * sum(kept) / len(kept), 1) if kept else None


def sample_views(suite: Viewed, store: ArtifactStore, judgments_key: str
                ) -> Iterator[SampleView]:
    samples, steps, turns = evaluation_tables(suite, store, judgments_key)
    rows = {(r["part"], r["question_id"]): r for r in samples.iter_rows(named=True)}
    sets = frame_sets(store.local_dir("frames"))
    by_episode: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for step in steps.sort("part", "question_id", "sample_index", "step").iter_rows(named=True):
        by_episode.setdefault((step["part"], step["question_id"], step["sample_index"]),
                              []).append(step)
    for (part, question_id, sample_index), gold in turns.sort(
            "part", "question_id", "sample_index", "turn").group_by(
            "part", "question_id", "sample_index", maintain_order=True):
        sample: dict[str, Any] = rows.get((part, question_id)) or {}
        golds = gold.to_dicts()
        windows = [(t["reply_start"], t["reply_end"]) for t in golds]
        files: dict[str, Any] = {}
        timeline: list[list[Any]] = []
        marked: list[int] = []
        for step in by_episode.get((part, question_id, sample_index), []):
            frames = _frames_of(sets.get(sample.get("video_sha256", ""), []),
                                step["frame_times"] or [])
            files.update(frames)
            inside = [str(i) for i, (start, end) in enumerate(windows)
                      if start <= step["reply_time"] <= end]
            if inside and step["response"] is not None and not step["silent"]:
                marked.append(len(timeline))
            timeline.append([
                f"{step['step']}-{step['step'] + 1} s",
                {"imgs": [{"img": name, "title": f"frame at {t:.2f} s"}
                          for (name, _), t in zip(frames, step["frame_times"])]}
                if frames else "(no frame stored)",
                "\n".join(step["subtitles"] or []) or None,
                "(silent)" if step["silent"] else step["response"] if step["response"]
                is not None else f"({step['status']}: {step['message']})",
                f"{step['reply_time']:g} s", ", ".join(inside) or None])
        turn_rows = [[t["turn"], f"{t['reply_start']:g}-{t['reply_end']:g} s",
                      json.loads(sample["answers_json"])[t["turn"]]["content"]
                      if sample.get("answers_json") else None,
                      "\n".join(f"{when:g} s: {reply} -> {score}" for reply, when, score in
                                zip(t["replies"], t["reply_times"], t["judge_scores"])) or None,
                      t["final_score"], None if t["pauc_0.5"] is None
                      else round(100 * t["pauc_0.5"], 1), {"badge": t["status"]}]
                     for t in golds]
        result = [facts(*((f"PAUC {name[5:]}", _mean([t[name] for t in golds]))
                          for name in OMEGAS)),
                  heading("Timeline"),
                  table(["time", "frames", "subtitles", "reply", "said at", "in turn"],
                        timeline, marked),
                  heading("Gold turns"),
                  table(["turn", "reply window", "gold answer", "replies judged -> score",
                         "final score", "PAUC 0.5", ""], turn_rows)]
        yield SampleView(
            sample=f"{part}:{question_id}", sample_index=int(sample_index),
            cells=(str(question_id), str(part), str(len(golds))), outcome=_outcome(golds),
            shared=[facts(("question", sample.get("question")),
                          ("video", sample.get("video")), ("duration", sample.get("duration")))],
            result=result, files=files)
