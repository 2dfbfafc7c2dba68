"""Helpers for tests that drive the CLI against a fake endpoint."""

from __future__ import annotations

import json
from pathlib import Path

from fake_openai import FakeOpenAI
from replay import JUDGE_PROMPT, SAMPLE_CORPUS


def cli_args(fake: FakeOpenAI, store: Path, *, eval_model: str = "openai/gen",
             judge_model: str = "openai/judge", corpus: Path = SAMPLE_CORPUS,
             extra: tuple[str, ...] = ()) -> list[str]:
    return ["--eval-model", eval_model, "--eval-api-base", fake.url,
            "--judge-model", judge_model, "--judge-api-base", fake.url,
            "--corpus", str(corpus), "--judge-prompt", str(JUDGE_PROMPT),
            "--store", str(store), *extra]


def run_cli(command: str, args: list[str]) -> int:
    from proactflow.cli import main

    return main([command, *args])


def read_json(path: Path):
    return json.loads(Path(path).read_text(encoding="utf-8"))

