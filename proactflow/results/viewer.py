"""`proactflow view`: a per-trigger viewer of the store's judgments, as files a browser opens.

The page (`index.html`) holds only the index: one small row per (trigger, evaluation, sample)
with its verdict, enough to filter and list 16 models x 624 triggers at once. What one trigger
shows (its context, rubric, and every evaluation's response and verdict) sits in its own
`data/t<n>.js`, loaded when the trigger is opened, by a script tag, so the folder works from
`file://` with no server. All text from the corpus or a model reaches the page as JSON and is
put on screen as text, never as markup.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from ..cache.artifacts import write_atomic
from .evaluations import Evaluation
from .viewer_page import PAGE

NOT_SCORED = "not scored"


def _verdict(status: str, score: str | None) -> str:
    return score if status == "scored" and score else NOT_SCORED


def _script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element of an HTML page."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) \
        .replace("</", "<\\/").replace("<!--", "<\\!--")


def short_names(names: list[str]) -> dict[str, str]:
    """Each name's shortest tail of `/`-separated parts that no other name ends with
    (`openai/echo-alpha` -> `echo-alpha`), so a list row stays one line; the page shows the
    full name on hover."""
    distinct = sorted(set(names))
    short = {}
    for name in distinct:
        parts = name.split("/")
        for count in range(1, len(parts) + 1):
            tail = "/".join(parts[-count:])
            if not any(other != name and (other == tail or other.endswith("/" + tail))
                       for other in distinct):
                break
        short[name] = tail
    return short


def _short_labels(evaluations: list[Evaluation]) -> list[str]:
    """The list's evaluation column: the short model name, the short judge name only when
    there is more than one judge, and what tells apart evaluations of the same pair."""
    models = short_names([e.model for e in evaluations])
    judges = short_names([e.judge for e in evaluations])
    labels = []
    for evaluation in evaluations:
        label = models[evaluation.model]
        if len(judges) > 1:
            label += f" \u00b7 {judges[evaluation.judge]}"
        full = evaluation.label or evaluation.base_label
        labels.append(label + full[len(evaluation.base_label):]
                      if full.startswith(evaluation.base_label) else label)
    return labels


def build_view(evaluations: list[Evaluation]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The page's index and one detail record per trigger (pure: tables in, JSON out)."""
    trigger_index: dict[tuple[str, int], int] = {}
    details: list[dict[str, Any]] = []
    rows: list[list[Any]] = []
    for number, evaluation in enumerate(evaluations):
        for trigger in evaluation.triggers.iter_rows(named=True):
            key = (trigger["unique_id_eval"], trigger["turn"])
            if key not in trigger_index:
                trigger_index[key] = len(details)
                rubric = trigger["rubric"] or {}
                details.append({
                    "dialogue": key[0], "turn": key[1], "phase": trigger["phase"],
                    "category": trigger["category_key"],
                    "context": [{"role": m["role"], "content": m["content"]}
                                for m in trigger["context"] or []],
                    "user_message": trigger["user_message"],
                    "rubric": {"pass": rubric.get("pass_criteria"),
                               "partial": rubric.get("partial_criteria"),
                               "fail": rubric.get("fail_criteria")},
                    "results": []})
        responses = {(r["unique_id_eval"], r["turn"], r["sample_index"]): r
                     for r in evaluation.responses.iter_rows(named=True)}
        for judged in evaluation.judgments.sort("unique_id_eval", "turn", "sample_index") \
                .iter_rows(named=True):
            key = (judged["unique_id_eval"], judged["turn"])
            if key not in trigger_index:
                continue
            place = trigger_index[key]
            response = responses.get((*key, judged["sample_index"])) or {}
            verdict = _verdict(judged["status"], judged["score"])
            rows.append([place, number, judged["sample_index"], verdict])
            details[place]["results"].append({
                "evaluation": number, "sample": judged["sample_index"], "verdict": verdict,
                "status": judged["status"], "rationale": judged["rationale"],
                "evidence": judged["evidence"], "verbatim": judged["evidence_verbatim"],
                "message": judged["message"], "response": response.get("response"),
                "response_status": response.get("status")})
    index = {
        "evaluations": [{"label": e.label or e.base_label, "short": short,
                         "model": e.model, "judge": e.judge, "source": e.source,
                         "trigger_set": e.trigger_set.describe() if e.trigger_set else ""}
                        for e, short in zip(evaluations, _short_labels(evaluations))],
        "short_models": short_names([e.model for e in evaluations]),
        "short_judges": short_names([e.judge for e in evaluations]),
        "triggers": [[d["dialogue"], d["turn"], d["phase"], d["category"]] for d in details],
        "rows": rows,
    }
    return index, details


def write_viewer(evaluations: list[Evaluation], folder: Path) -> Path:
    """Write the viewer into `folder` (replacing an earlier one); return its index.html."""
    index, details = build_view(evaluations)
    data = folder / "data"
    if data.exists():
        shutil.rmtree(data)
    data.mkdir(parents=True)
    for place, detail in enumerate(details):
        write_atomic(data / f"t{place}.js", (
            f"proactflowTrigger({place},{_script_json(detail)});\n").encode("utf-8"))
    page = folder / "index.html"
    write_atomic(page, PAGE.replace("/*INDEX*/null", _script_json(index)).encode("utf-8"))
    return page


def frame_summary(evaluations: list[Evaluation]) -> str:
    rows = sum(e.judgments.height for e in evaluations)
    triggers = pl.concat([e.triggers.select("unique_id_eval", "turn") for e in evaluations]) \
        .unique().height if evaluations else 0
    return f"{len(evaluations)} evaluations, {triggers} triggers, {rows} verdicts"
