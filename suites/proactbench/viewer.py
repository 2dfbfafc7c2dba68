"""ProactBench in the per-trigger viewer (results/viewer/site.py): its list's columns and
outcomes, and each trigger's context, rubric, and every evaluation's response and verdict, read
from the evaluations with their triggers (results/evaluations.py's)."""

from __future__ import annotations

from typing import Any

NOT_SCORED = "not scored"

SPEC = {
    "name": "proactbench", "title": "ProactBench", "noun": "verdicts",
    "columns": [["dialogue", "26%", False], ["turn", "34px", False], ["phase", "84px", True]],
    "outcome": "verdict", "extra": ["category"], "outcome_width": "86px",
    "outcomes": {"PASS": "good", "PARTIAL": "mid", "FAIL": "bad", NOT_SCORED: "none"},
    "samples_noun": "triggers"}
"""The viewer's list for ProactBench, as the page reads it (`samples_noun`: what the page's
summary calls its samples; "samples" for a suite whose spec does not say)."""


def _verdict(status: str, score: str | None) -> str:
    return score if status == "scored" and score else NOT_SCORED


def add_evaluations(evaluations: list[Any], samples: list[list[Any]],
                    details: list[dict[str, Any]], rows: list[list[Any]],
                    only: set[str] | None = None) -> None:
    """Each trigger of `evaluations` as a sample of the page (suite 0) with its detail record,
    and a row per verdict; with `only`, just those triggers (`<dialogue>:<turn>`)."""
    trigger_index: dict[tuple[str, int], int] = {}
    for number, evaluation in enumerate(evaluations):
        for trigger in evaluation.triggers.iter_rows(named=True):
            key = (trigger["unique_id_eval"], trigger["turn"])
            if only is not None and f"{key[0]}:{key[1]}" not in only:
                continue
            if key not in trigger_index:
                trigger_index[key] = len(details)
                rubric = trigger["rubric"] or {}
                samples.append([0, f"{key[0]}:{key[1]}", key[0], key[1], trigger["phase"],
                                trigger["category_key"]])
                details.append({
                    "kind": "proactbench",
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
