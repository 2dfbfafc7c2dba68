"""What each model family really receives: the protocol's settings adapted to litellm's model map,
every deviation recorded, and every command the README and the docs show valid."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from helpers import cli_args, read_json, run_cli
from proactflow.cli import build_parser, settings_from_args
from proactflow.common.errors import UserError
from proactflow.config.effective import safety_settings_off, wire_params
from proactflow.config.settings import ModelRole, role_generation
from proactflow.providers.llm import ChatRequest
from proactflow.sweeps.sweep_entry import SweepModel
from replay import synthetic_judge, synthetic_model

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SHOWN_IN = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
"""Every page that shows commands to a user."""


def sent(fake, model: str) -> dict:
    request = next(r for r in fake.requests if r["model"] == model)
    return {k: request.get(k) for k in ("temperature", "top_p", "max_tokens",
                                        "max_completion_tokens", "reasoning_effort")}


@pytest.mark.usefixtures("prefect_server")
def test_what_reaches_the_wire_per_model_family(fake, store, tmp_path):
    fake.responders.update({"gpt-4o-mini": synthetic_model, "gpt-5.4": synthetic_judge,
                            "o3": synthetic_model, "gpt-4o": synthetic_judge})
    out = tmp_path / "out"
    assert run_cli("run", cli_args(fake, store, eval_model="openai/gpt-4o-mini",
                                   judge_model="openai/gpt-5.4",
                                   extra=("--limit", "1", "--out", str(out)))) == 0
    assert sent(fake, "gpt-4o-mini") == {"temperature": 0.7, "top_p": 1.0, "max_tokens": 8192,
                                         "max_completion_tokens": None,
                                         "reasoning_effort": None}
    # A reasoning model: temperature 1, no top_p, litellm's max_completion_tokens, effort medium.
    assert sent(fake, "gpt-5.4") == {"temperature": 1.0, "top_p": None, "max_tokens": None,
                                     "max_completion_tokens": 32768,
                                     "reasoning_effort": "medium"}
    assert read_json(out / "metrics.json")["proactflow"]["protocol_conformant"] is True

    fake.reset_counts()
    out = tmp_path / "out2"
    assert run_cli("run", cli_args(fake, store, eval_model="openai/o3",
                                   judge_model="openai/gpt-4o",
                                   extra=("--limit", "1", "--out", str(out)))) == 0
    assert sent(fake, "o3")["temperature"] == 1.0 and sent(fake, "o3")["top_p"] is None
    # gpt-4o writes at most 16,384 tokens: the judge's 32,768 is lowered, and that is recorded.
    assert sent(fake, "gpt-4o")["max_tokens"] == 16384
    facts = read_json(out / "metrics.json")["proactflow"]
    assert facts["protocol_conformant"] is False
    [deviation] = facts["protocol_deviations"]["judge"]
    assert (deviation["setting"], deviation["protocol"], deviation["sent"]) == \
        ("max_tokens", 32768, 16384)


def test_a_model_that_takes_no_sampling_parameters_gets_none():
    generation, deviations = role_generation("model_under_test", "anthropic/claude-opus-4-7",
                                             {"max_tokens": 32000})
    assert generation.temperature is None and generation.top_p is None
    assert {d.setting for d in deviations} >= {"temperature", "top_p"}
    with pytest.raises(UserError, match="accepts no temperature"):
        role_generation("model_under_test", "anthropic/claude-opus-4-7", {"temperature": 0.5})
    with pytest.raises(UserError, match="writes at most 16,384 tokens"):
        role_generation("judge", "gpt-4o", {"max_tokens": 40000})


def test_provider_translation_for_anthropic_and_gemini_offline():
    claude, _ = role_generation("judge", "anthropic/claude-opus-4-7", {"max_tokens": 32000})
    params = wire_params("anthropic/claude-opus-4-7", {
        "max_tokens": claude.max_tokens, "reasoning_effort": claude.reasoning_effort})
    assert params["max_tokens"] == 32000 and "temperature" not in params
    assert "thinking" in params or "output_config" in params  # effort becomes thinking

    gemini, _ = role_generation("model_under_test", "gemini/gemini-2.5-pro",
                                {"gemini_safety_off": True})
    role = ModelRole(model="gemini/gemini-2.5-pro", generation=gemini)
    params = wire_params(role.model, dict(ChatRequest.build(role, []).params))
    assert params["max_output_tokens"] == 32768 and params["temperature"] == 1.0
    assert [s["threshold"] for s in params["safety_settings"]] == ["BLOCK_NONE"] * 4
    assert role.key_material()["generation"]["gemini_safety_off"] is True  # in the key
    with pytest.raises(UserError, match="only Gemini models"):
        safety_settings_off("gpt-4o")


def test_a_sweep_entry_can_unset_a_setting():
    role = SweepModel(model="gpt-4o-mini", top_p="none").role("model_under_test")
    assert role.generation.top_p is None and role.generation.temperature == 0.7
    assert [d.setting for d in role.deviations] == ["top_p"]


def _shown_commands() -> list[tuple[str, list[str]]]:
    """Every `proactflow <command>` in a ```bash block of the README, CONTRIBUTING.md and the
    documentation, as (where it is shown, its words after `proactflow`): continued lines joined,
    comments dropped, and `a && b`, `a; b`, `a &` read as the commands they chain."""
    commands = []
    for page in SHOWN_IN:
        where = page.relative_to(ROOT)
        blocks = re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL)
        for block in blocks:
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
                lexer.whitespace_split = True
                words: list[str] = []
                for word in [*lexer, ";"]:
                    if word and set(word) <= set("();<>|&"):
                        if words and Path(words[0]).name == "proactflow":
                            commands.append((f"{where}: {' '.join(line.split())}", words[1:]))
                        words = []
                    else:
                        words.append(word)
    return commands


def _with_the_files_they_name(commands: list[tuple[str, list[str]]], folder: Path,
                              monkeypatch) -> None:
    """The prompt files the examples name, as a user would have them in the working folder
    (the parser reads a --prompt file)."""
    monkeypatch.chdir(folder)
    for _, words in commands:
        for word in words:
            if word.endswith(".txt"):
                (folder / word.rpartition("=")[2]).write_text("a prompt", encoding="utf-8")


def test_every_command_shown_in_the_docs_parses(tmp_path, monkeypatch):
    commands = _shown_commands()
    _with_the_files_they_name(commands, tmp_path, monkeypatch)
    shown = {words[0] for _, words in commands}
    # The set-up line, the docs' examples and every command group the docs explain.
    assert {"run", "rejudge", "status", "calibrate", "sweep", "serve", "import", "report",
            "view", "runs", "gc"} <= shown
    parser = build_parser()
    for where, words in commands:
        try:
            parser.parse_args(words)
        except SystemExit as refused:  # the parser's one-line usage error went to stderr
            pytest.fail(f"{where}: refused by the CLI's parser (exit {refused.code})")


def test_every_run_shown_in_the_docs_builds_its_parameters(tmp_path, monkeypatch):
    examples = [(where, words) for where, words in _shown_commands()
                if words[0] in ("run", "rejudge", "calibrate")]
    assert len(examples) >= 8
    _with_the_files_they_name(examples, tmp_path, monkeypatch)
    for where, words in examples:
        args = build_parser().parse_args(words)
        if args.command == "rejudge" and not args.eval_model:
            continue  # --all-models: the settings come from the store
        try:
            settings = settings_from_args(args)  # raises UserError on any refused setting
            for role in settings.roles.values():  # no judge for a suite scored by rules
                wire_params(role.model, dict(ChatRequest.build(role, []).params))
        except UserError as refused:
            pytest.fail(f"{where}: {refused}")
    opus = next(words for _, words in examples
                if "anthropic/claude-opus-4-7" in words and words[0] == "run")
    settings = settings_from_args(build_parser().parse_args(opus))
    assert settings.model_under_test.generation.temperature is None  # it used to fail every call


def test_a_wrong_flag_in_a_shown_command_would_fail(monkeypatch, tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\nproactflow view --no-open && proactflow gc --keep-latst 7\n```\n",
                    encoding="utf-8")
    monkeypatch.setattr("test_protocol_params.SHOWN_IN", [page])
    monkeypatch.setattr("test_protocol_params.ROOT", tmp_path)
    [(_, view), (where, gc)] = _shown_commands()
    assert view == ["view", "--no-open"] and where == "page.md: " + \
        "proactflow view --no-open && proactflow gc --keep-latst 7"
    with pytest.raises(SystemExit):
        build_parser().parse_args(gc)
