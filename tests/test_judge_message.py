"""The judge's input (PROTOCOL.md step 3) byte for byte, and reading the judge's output."""

from __future__ import annotations

import json

import polars as pl
import pytest

from proactflow.suites.proactbench.corpus import Rubric
from proactflow.config.settings import ModelRole, protocol_defaults
from proactflow.suites.sources import Prompt, read_corpus_file, read_judge_prompt_file
from proactflow.suites.proactbench.judgments import (evidence_is_verbatim, judge_request, judge_user_message,
                                         parse_judge_reply)
from proactflow.suites.proactbench.triggers import build_triggers
from replay import (JUDGE_PROMPT, SAMPLE_CORPUS, SHARED_CORPUS, SHARED_JUDGE_PROMPT, TRIGGERS,
                    read_jsonl)

RUBRIC = Rubric(
    type="CRITICAL",
    pass_criteria="Links the “weekend” anchor to the deadline — and proposes a buffer.",
    partial_criteria="Notices the clash but doesn’t act.",
    fail_criteria="Ignores it.",
)

GOLDEN_EMPTY = """\
[TRIGGER POINT ACTIVE — Score the Assistant's LAST response]
This trigger was declared for turn 4.
Evaluation Rubric:
{
  "type": "CRITICAL",
  "pass_criteria": "Links the “weekend” anchor to the deadline — and proposes a buffer.",
  "partial_criteria": "Notices the clash but doesn’t act.",
  "fail_criteria": "Ignores it."
}

Dialogue History:
(empty — this is the first turn)

--- END OF CONTEXT ---
Now respond with the JSON object containing only the evaluation_result."""

GOLDEN_HISTORY = """\
[TRIGGER POINT ACTIVE — Score the Assistant's LAST response]
This trigger was declared for turn 2.
Evaluation Rubric:
{
  "type": "CRITICAL",
  "pass_criteria": "Links the “weekend” anchor to the deadline — and proposes a buffer.",
  "partial_criteria": "Notices the clash but doesn’t act.",
  "fail_criteria": "Ignores it."
}

Dialogue History:
[User]: I’m off this weekend — café plans.

[Assistant]: Enjoy “the break”.

[User]: Deadline is Monday.
Line two.

[Assistant]: Then let’s draft Friday — naïve plan: 2 h.

--- END OF CONTEXT ---
Now respond with the JSON object containing only the evaluation_result."""


def test_golden_judge_message_with_empty_history():
    assert judge_user_message(4, RUBRIC, []).encode("utf-8") == GOLDEN_EMPTY.encode("utf-8")


def test_golden_judge_message_with_history():
    history = [("user", "I’m off this weekend — café plans."),
               ("assistant", "Enjoy “the break”."),
               ("user", "Deadline is Monday.\nLine two."),
               ("assistant", "Then let’s draft Friday — naïve plan: 2 h.")]
    assert judge_user_message(2, RUBRIC, history).encode("utf-8") == \
        GOLDEN_HISTORY.encode("utf-8")


@pytest.fixture(params=["project", "shared"])
def corpus_and_prompt(request):
    """The tests' own corpus always; the benchmark's sample and prompt where they are."""
    if request.param == "project":
        return SAMPLE_CORPUS, JUDGE_PROMPT, TRIGGERS
    request.getfixturevalue("shared_data")
    return SHARED_CORPUS, SHARED_JUDGE_PROMPT, 40


def test_every_sample_trigger_renders_by_the_protocol_rules(corpus_and_prompt):
    """Check each rendered judge request against the raw corpus rows, rule by rule."""
    corpus, prompt_file, count = corpus_and_prompt
    rows, _ = read_corpus_file(corpus)
    raw_rows = {r["unique_id_eval"]: r for r in read_jsonl(corpus)}
    prompt = read_judge_prompt_file(prompt_file)
    judge = ModelRole(model="openai/judge", generation=protocol_defaults("judge", "openai/judge"))
    triggers = build_triggers(rows)
    assert triggers.height == count
    for trigger in triggers.filter(pl.col("evaluable")).iter_rows(named=True):
        raw = raw_rows[trigger["unique_id_eval"]]
        turn = trigger["turn"]
        request = judge_request(trigger, "MY REGENERATED REPLY", judge, prompt)
        (system_role, system), (user_role, message) = request.messages
        assert (system_role, user_role) == ("system", "user")
        assert system == prompt.text
        header, rest = message.split("\n\nDialogue History:\n", 1)
        history, footer = rest.rsplit("\n\n--- END OF CONTEXT ---\n", 1)
        assert footer == "Now respond with the JSON object containing only the evaluation_result."
        assert header.startswith("[TRIGGER POINT ACTIVE \u2014 Score the Assistant's LAST "
                                 f"response]\nThis trigger was declared for turn {turn}.\n"
                                 "Evaluation Rubric:\n")
        rubric_json = header.split("Evaluation Rubric:\n", 1)[1]
        point = next(p for p in raw["trigger_points"] if p["turn"] == turn)
        expected_rubric = {k: point["evaluation_rubric"][k] for k in
                           ("type", "pass_criteria", "partial_criteria", "fail_criteria")}
        assert list(json.loads(rubric_json).items()) == list(expected_rubric.items())
        expected = []
        for record in raw["turn_records"]:
            if record["turn"] < turn:
                expected += [f"[User]: {record['user_message']}",
                             f"[Assistant]: {record['assistant_response']}"]
            elif record["turn"] == turn:
                expected.append(f"[User]: {record['user_message']}")
        expected.append("[Assistant]: MY REGENERATED REPLY")
        assert history == "\n\n".join(expected)
        # Hidden material never reaches the judge.
        for record in raw["turn_records"]:
            planner = json.dumps(record.get("planner"), ensure_ascii=False)
            if record.get("planner"):
                assert planner not in message
        assert "evaluation_result" not in header
        assert raw["blueprint_id"] not in message


def test_model_under_test_sees_only_earlier_turns(corpus_and_prompt):
    rows, _ = read_corpus_file(corpus_and_prompt[0])
    triggers = build_triggers(rows)
    for trigger in triggers.filter(pl.col("evaluable")).iter_rows(named=True):
        context = trigger["context"]
        assert context[-1]["role"] == "user"
        roles = [m["role"] for m in context]
        assert roles == ["user", "assistant"] * (len(context) // 2) + ["user"]
        assert len(context) == 2 * (trigger["turn"] - 1) + 1


@pytest.mark.parametrize("reply", [
    '{"evaluation_result": {"status": "EVALUATED", "score": "PASS", "rationale": "r", '
    '"evidence": "e"}}',
    '```json\n{"evaluation_result": {"status": "EVALUATED", "score": "PASS", "rationale": "r", '
    '"evidence": "e"}}\n```',
    'Here you go: {"status": "EVALUATED", "score": "PASS", "rationale": "r", "evidence": "e"}',
])
def test_parse_accepts_valid_verdicts(reply):
    verdict = parse_judge_reply(reply)
    assert (verdict.status, verdict.score, verdict.evidence) == ("EVALUATED", "PASS", "e")


@pytest.mark.parametrize("reply, problem", [
    ("I think it passes.", "no JSON object"),
    ('{"evaluation_result": {"status": "EVALUATED", "score": "PASS"', "no JSON object"),
    ('{"evaluation_result": {"status": "EVALUATED", "score": "GREAT"}}', "score"),
    ('{"evaluation_result": {"status": "EVALUATED"}}', "without a score"),
    ('{"evaluation_result": {"status": "DONE", "score": "PASS"}}', "status"),
    ('{"verdict": "PASS"}', "evaluation_result"),
])
def test_parse_rejects_invalid_verdicts(reply, problem):
    with pytest.raises(ValueError, match=problem):
        parse_judge_reply(reply)


def test_evidence_check_normalises_whitespace_and_quotes():
    response = "First,  back up\nyour photos.\n\nThen run a long SMART test."
    assert evidence_is_verbatim("back up your photos.", response)
    assert evidence_is_verbatim("“Then run a long SMART test.”", response)
    assert not evidence_is_verbatim("run a checksum pass", response)
    assert not evidence_is_verbatim("  ", response)


def test_judge_prompt_hash_changes_the_request():
    rows, _ = read_corpus_file(SAMPLE_CORPUS)
    trigger = build_triggers(rows).row(0, named=True)
    judge = ModelRole(model="openai/judge", generation=protocol_defaults("judge", "openai/judge"))
    a = judge_request(trigger, "reply", judge, Prompt("prompt A", "a", "test"))
    b = judge_request(trigger, "reply", judge, Prompt("prompt B", "b", "test"))
    assert a.key != b.key
