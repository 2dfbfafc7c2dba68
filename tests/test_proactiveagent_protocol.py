"""ProactiveBench's messages and reply checks, byte for byte as upstream's scripts build them.

The expected texts are written out by hand from upstream's construction (json.dumps with its
default separators and ASCII escapes for the model under test; indent 4 and raw UTF-8 for the
judge), on the project's own traces and stand-in prompts in tests/data/proactiveagent/.
"""

from __future__ import annotations

import json

import pytest

from proactflow.suites.proactiveagent.data import read_local_corpus
from proactflow.suites.proactiveagent.protocol import (AgentReply, agent_messages,
                                                       agent_user_message, bare_observation,
                                                       judge_messages, parse_agent_reply,
                                                       parse_judge_reply, read_calibration_verdict)
from replay import PROJECT_DATA

DATA = PROJECT_DATA / "proactiveagent"
SYSTEM = (DATA / "agent_system_prompt.txt").read_text(encoding="utf-8")
STEP = (DATA / "agent_step_instruction.txt").read_text(encoding="utf-8")
JUDGE_SYSTEM = (DATA / "reward_system_prompt.txt").read_text(encoding="utf-8")
JUDGE_STEP = (DATA / "reward_instruction.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def writing():
    events, _ = read_local_corpus(DATA)
    return [e for e in events if e.trace == "writing_b"]


def test_the_newest_turn_carries_the_observation_unescaped_inside_a_string():
    assert bare_observation("1700000000.0", "The user opens 'parser.py'.") == \
        '{"Time": "1700000000.0", "Event": "The user opens \'parser.py\'."}'
    assert agent_user_message(STEP, "1700000000.0", "The user opens 'parser.py'.") == (
        '{"Instructions": "Test stand-in: read the newest observation and say whether to help.",'
        ' "Observation": "{"Time": "1700000000.0", "Event": "The user opens \'parser.py\'."}"}')


def test_non_ascii_and_backslashes_are_escaped_as_pythons_default_json():
    assert bare_observation("1", "Chère 🎉 a\\nb") == \
        '{"Time": "1", "Event": "Ch\\u00e8re \\ud83c\\udf89 a\\\\nb"}'


def test_the_first_event_is_system_then_the_wrapped_turn(writing):
    first = writing[0]
    assert agent_messages(SYSTEM, STEP, [(first.time, first.event)], []) == [
        ("system", SYSTEM),
        ("user", '{"Instructions": "Test stand-in: read the newest observation and say whether '
                 'to help.", "Observation": "{"Time": "1700100000.0", "Event": "The user creates '
                 '\'lettre.md\' and types the heading \'Ch\\u00e8re Madame Dupont,\'."}"}')]


def test_event_k_replays_the_growing_chat_with_the_models_own_replies_and_a_failure(writing):
    first = parse_agent_reply(
        'Here you are:\n```json\n{"Purpose": "Start a letter", "Thoughts": "Formal French.", '
        '"Proactive Task": "Suggest a formal opening", "Response": "Shall I?"}\n```')
    third = parse_agent_reply('{"Thoughts":"A quote","Proactive Task":"null","Purpose":"Quote",'
                              '"Response":"null"}')
    events = [(e.time, e.event) for e in writing]  # all five: later ones are ignored
    messages = agent_messages(SYSTEM, STEP, events, [first.history_text, None,
                                                     third.history_text])
    assert messages == [
        ("system", SYSTEM),
        ("user", '{"Time": "1700100000.0", "Event": "The user creates \'lettre.md\' and types '
                 'the heading \'Ch\\u00e8re Madame Dupont,\'."}'),
        ("assistant", '{"Purpose": "Start a letter", "Thoughts": "Formal French.", '
                      '"Proactive Task": "Suggest a formal opening", "Response": "Shall I?"}'),
        # every attempt at event 1 failed: it stays wrapped, with no assistant turn after it
        ("user", '{"Instructions": "Test stand-in: read the newest observation and say whether '
                 'to help.", "Observation": "{"Time": "1700100040.0", "Event": "The user types a '
                 'paragraph asking for a meeting on 12 March at the caf\\u00e9 \\u00ab Le '
                 'Procope \\u00bb."}"}'),
        ("user", '{"Time": "1700100100.75", "Event": "The user copies the phrase '
                 '\'\\u4f1a\\u8b70\\u306e\\u65e5\\u7a0b\' from a chat window into the '
                 'document."}'),
        ("assistant", '{"Thoughts": "A quote", "Proactive Task": null, "Purpose": "Quote", '
                      '"Response": null}'),
        ("user", '{"Instructions": "Test stand-in: read the newest observation and say whether '
                 'to help.", "Observation": "{"Time": "1700100160.0", "Event": "The user adds a '
                 'line:\\\\n\'P.S. \\ud83c\\udf89 Congratulations on the new office!\'"}"}'),
    ]


def test_more_replies_than_events_is_a_programming_error():
    with pytest.raises(ValueError, match="need at least 3 events"):
        agent_messages(SYSTEM, STEP, [("1", "a"), ("2", "b")], [None, None])


@pytest.mark.parametrize("text, history, task", [
    ('{"Purpose": "p", "Proactive Task": "Fix it", "Response": "Shall I?"}',
     '{"Purpose": "p", "Proactive Task": "Fix it", "Response": "Shall I?"}', "Fix it"),
    # the first ```json fence is read, whatever surrounds it
    ('ok\n```json\n{"Proactive Task": "A"}\n```\nand\n```json\n{"Proactive Task": "B"}\n```',
     '{"Proactive Task": "A"}', "A"),
    ('{"Proactive Task": "null", "Response": "null"}',
     '{"Proactive Task": null, "Response": null}', None),
    # a missing task becomes a null appended last; the other keys keep the model's order
    ('{"Thoughts": "t", "Purpose": "p", "Response": "r"}',
     '{"Thoughts": "t", "Purpose": "p", "Response": "r", "Proactive Task": null}', None),
    ('{\n  "Proactive Task": null,\n  "Purpose": "\u00e9t\u00e9"\n}',
     '{"Proactive Task": null, "Purpose": "\\u00e9t\\u00e9"}', None),
    # an empty task and the word "None" are proposals for upstream: only null and "null" are not
    ('{"Proactive Task": ""}', '{"Proactive Task": ""}', ""),
    ('{"Proactive Task": "None"}', '{"Proactive Task": "None"}', "None"),
])
def test_replies_upstream_accepts(text, history, task):
    assert parse_agent_reply(text) == AgentReply(history_text=history, proactive_task=task)


@pytest.mark.parametrize("text, reason", [
    ("I would suggest fixing the test.", "not JSON"),
    ('```json {"Proactive Task": "x"}```', "fence"),  # upstream's pattern needs the newlines
    ('```JSON\n{"Proactive Task": "x"}\n```', "not JSON"),  # its test is case-sensitive
    ('```\n{"Proactive Task": "x"}\n```', "not JSON"),
    ('["Fix it"]', "an array, not a JSON object"),
    ("null", "null, not a JSON object"),
])
def test_replies_upstream_refuses(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_agent_reply(text)


@pytest.mark.parametrize("text, task", [
    ('{"Proactive Task": false}', False),
    ('{"Proactive Task": ["a", "b"]}', ["a", "b"]),
    ('{"Proactive Task": 3}', 3),
    ('{"Proactive Task": {"step": "x"}}', {"step": "x"}),
])
def test_a_task_that_is_not_a_string_is_a_proposal_passed_on_as_it_is(text, task):
    reply = parse_agent_reply(text)
    assert reply.proactive_task == task
    _, user = judge_messages(JUDGE_SYSTEM, JUDGE_STEP, [{"time": "1", "event": "e"}],
                             reply.proactive_task)
    assert json.loads(user[1])["Proposed Task"] == task


def test_the_judge_message_is_indented_raw_utf8_in_the_traces_key_order(writing):
    observations = [e.observation() for e in writing[:3]]
    messages = judge_messages(JUDGE_SYSTEM, JUDGE_STEP, observations, "Translate it")
    assert messages[0] == ("system", JUDGE_SYSTEM)
    assert messages[1] == ("user", """{
    "Observations (Time Ascending)": [
        {
            "time": "1700100000.0",
            "event": "The user creates 'lettre.md' and types the heading 'Chère Madame Dupont,'."
        },
        {
            "time": "1700100040.0",
            "event": "The user types a paragraph asking for a meeting on 12 March at the café « Le Procope »."
        },
        {
            "event": "The user copies the phrase '会議の日程' from a chat window into the document.",
            "time": "1700100100.75"
        }
    ],
    "Proposed Task": "Translate it",
    "Instruction": "Test stand-in: give the verdict now, reasoning as the user — « en première personne »."
}""")


def test_no_proposal_is_a_single_null(writing):
    _, user = judge_messages(JUDGE_SYSTEM, JUDGE_STEP, [writing[3].observation()], None)
    assert user[1].endswith('        }\n    ],\n    "Proposed Task": null,\n    "Instruction": '
                            '"Test stand-in: give the verdict now, reasoning as the user — « en '
                            'première personne »."\n}')
    assert '"event": "The user adds a line:\\\\n\'P.S. 🎉 Congratulations' in user[1]


@pytest.mark.parametrize("text, accepted", [
    ('{"thought": "Useful.", "judgement": "accepted"}', True),
    ('{"thought": "Not now.", "judgement": "rejected"}', False),
    # json5, as upstream: single quotes, unquoted keys, comments, trailing commas
    ("{thought: 'fine', // short\n 'judgement': 'accepted',}", True),
    # upstream's test is `judgement == "accepted"`: any other value is a rejection, not asked
    # again
    ('{"judgement": "Accepted"}', False),
    ('{"judgement": "accept"}', False),
    ('{"judgement": true}', False),
    ('{"judgement": null}', False),
])
def test_judge_verdicts_as_upstreams_judging_script_reads_them(text, accepted):
    assert parse_judge_reply(text) is accepted


@pytest.mark.parametrize("text, reason", [
    ('```json\n{"judgement": "accepted"}\n```', "not JSON5"),  # upstream strips no fence
    ('{"thought": "hmm"}', 'no "judgement"'),
    ('[{"judgement": "accepted"}]', "an array, not a JSON object"),
    ("", "not JSON5"),
])
def test_a_judge_reply_without_a_verdict_to_read_is_asked_again(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_judge_reply(text)


@pytest.mark.parametrize("text, verdict", [
    ('{"thought": "t", "judgement": "accepted"}', True),
    ('{"judgement":"rejected"}', False),  # json.loads needs no space
    # not JSON: the expression, anywhere, the last match winning
    ('```json\n{"thought": "t", "judgement": "accepted"}\n```', True),
    ('I think so.\n{"judgement": "rejected", "thought": "cut', False),
    ('"judgement": "accepted" ... on second thought "judgement": "rejected"', False),
    # no verdict: another value parsed by json.loads is not looked for again
    ('{"judgement": "Accepted"}', None),
    ('{"judgement": null}', None),
    ('{"thought": "no verdict"}', None),
    ('```json\n{"judgement":"accepted"}\n```', None),  # the expression wants one space
    ("Accepted.", None),
    ("", None),
])
def test_calibration_reads_a_verdict_as_upstreams_scoring_script(text, verdict):
    assert read_calibration_verdict(text) is verdict
