"""Replaying recorded episodes of the genuine package through proactflow's environments and
listing every difference (for the golden-trace and differential tests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proactflow.suites.proactivebench_mllm.environment import (
    EpisodeState, start, statistics, step, stop_reason, view)
from proactflow.suites.proactivebench_mllm.environment.images import pixel_digest, shown_image
from proactflow.suites.proactivebench_mllm.sample import EnvironmentCrash, Sample


def replay(sample: Sample, corpus: Path, record: dict[str, Any], hint: bool,
           reference: bool = False) -> tuple[list[str], EpisodeState]:
    """Differences between the recorded episode and ours on the same replies."""
    where = f"{record['short']} {record['sample_id']} {record['script']}"
    problems: list[str] = []
    state = start(sample, reference)
    crash = record.get("crash")
    for index, recorded in enumerate(record["steps"]):
        shown = view(sample, state, hint)
        image = shown_image(corpus, shown)
        ours = {"image": shown.image, "options": list(shown.options), "prompt": shown.prompt,
                "pixels": pixel_digest(image), "size": list(image.size)}
        if "question" in recorded:
            ours["question"] = shown.question
        for key, value in ours.items():
            if recorded[key] != value:
                problems.append(f"{where} step {index} {key}: {value!r} != {recorded[key]!r}")
        try:
            state = step(sample, state, recorded["reply"])
        except EnvironmentCrash:
            if not (crash and crash["in"] == "evaluate" and crash["replies"] == index + 1):
                problems.append(f"{where} step {index}: we crash, the package does not")
            return problems, state
        for key in ("action_evaluation", "category_evaluation", "stop"):
            if key in recorded:
                value = state.turns[-1].action_evaluation if key == "action_evaluation" else (
                    state.turns[-1].category_evaluation if key == "category_evaluation"
                    else state.stop)
                if recorded[key] != value:
                    problems.append(f"{where} step {index} {key}: {value!r} != "
                                    f"{recorded[key]!r}")
    if crash and crash["in"] == "evaluate":
        problems.append(f"{where}: the package crashes on reply {crash['replies']}, we do not")
        return problems, state
    if crash:  # in get_state, after the recorded steps
        try:
            view(sample, state, hint)
            problems.append(f"{where}: the package crashes showing step {crash['replies']}, "
                            "we do not")
        except EnvironmentCrash:
            pass
        return problems, state
    ours_stats = statistics(sample, state)
    if ours_stats != record["statistics"]:
        problems.append(f"{where} statistics: {ours_stats} != {record['statistics']}")
    if "stop" in record and record["stop"] != state.stop:
        problems.append(f"{where} stop: {state.stop} != {record['stop']}")
    if state.stop and stop_reason(state) is None:
        problems.append(f"{where}: stopped without a reason")
    return problems, state
