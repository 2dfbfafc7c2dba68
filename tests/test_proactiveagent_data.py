"""ProactiveBench's data as rows: the project's own traces and reward rows, every malformed
input refused in one line, and the benchmark's real files in ../shared when present."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest

from proactflow.common.errors import UserError
from proactflow.suites.proactiveagent.data import read_local_corpus, read_reward_test_set
from proactflow.suites.proactiveagent.metrics import CATEGORIES
from replay import PROJECT_DATA, SHARED

DATA = PROJECT_DATA / "proactiveagent"
REAL = SHARED.parent / "proactiveagent" / "dataset"


def test_the_traces_named_by_the_splits_load_in_order():
    events, splits = read_local_corpus(DATA)
    assert splits == {"demo_all": ["coding_a", "writing_b", "reading_c"],
                      "demo_coding": ["coding_a"], "demo_writing": ["writing_b", "reading_c"]}
    assert [(e.trace, e.index) for e in events][:5] == \
        [("coding_a", 0), ("coding_a", 1), ("coding_a", 2), ("coding_a", 3), ("writing_b", 0)]
    assert Counter(e.trace for e in events) == {"coding_a": 4, "writing_b": 5, "reading_c": 3}
    assert {e.trace: e.splits for e in events} == {
        "coding_a": ("demo_all", "demo_coding"), "writing_b": ("demo_all", "demo_writing"),
        "reading_c": ("demo_all", "demo_writing")}
    assert sum(e.task_status for e in events) == 8


def test_the_observation_is_kept_as_the_file_holds_it():
    events, _ = read_local_corpus(DATA)
    quoted = next(e for e in events if e.trace == "writing_b" and e.index == 2)
    assert quoted.observation_json == ('{"event": "The user copies the phrase \'会議の日程\' from '
                                       'a chat window into the document.", "time": '
                                       '"1700100100.75"}')
    assert list(quoted.observation()) == ["event", "time"]
    assert quoted.time == "1700100100.75" and quoted.event.startswith("The user copies")
    escaped = next(e for e in events if e.trace == "writing_b" and e.index == 3)
    assert "line:\\n'P.S. 🎉" in escaped.event  # a backslash and an n, as in the data


def corpus_copy(tmp_path):
    folder = tmp_path / "traces"
    shutil.copytree(DATA, folder)
    return folder


def test_a_missing_folder_or_splits_file_is_one_line(tmp_path):
    with pytest.raises(UserError, match=f"^ProactiveBench folder not found: {tmp_path}/nope$"):
        read_local_corpus(tmp_path / "nope")
    with pytest.raises(UserError, match=f"^{tmp_path} has no splits.json"):
        read_local_corpus(tmp_path)


@pytest.mark.parametrize("file_name, content, message", [
    ("splits.json", '{"demo": {"files": ["coding_a.json", "gone.json"]}}',
     "splits.json: split 'demo' names gone.json, which is not in "),
    ("splits.json", '{"demo": {"theme": "All"}}',
     "splits.json: split 'demo' has no list of file names \"files\""),
    ("splits.json", '{"demo": {"files": ["coding_a.json", "coding_a.json"]}}',
     "splits.json: split 'demo' names a file twice"),
    ("coding_a.json", '[{"observation": {"time": "1", "event": "e"}, "task_status": true},]',
     "coding_a.json: invalid JSON (Expecting value at line 1 column 68)"),
    ("coding_a.json", '[{"observation": {"time": "1"}, "task_status": true}]',
     "coding_a.json: event 0 has no observation.event"),
    ("coding_a.json", '[{"observation": {"time": 1, "event": "e"}, "task_status": true}]',
     "coding_a.json: event 0 has a non-string observation.time"),
    ("coding_a.json", '[{"observation": {"time": "1", "event": "e"}}]',
     "coding_a.json: event 0 has no task_status"),
    ("coding_a.json", '[{"observation": {"time": "1", "event": "e"}, "task_status": "yes"}]',
     "coding_a.json: event 0 has a non-boolean task_status"),
    ("coding_a.json", '{"observation": {}}', "coding_a.json: expected a non-empty JSON list"),
])
def test_a_malformed_corpus_is_refused_naming_file_and_problem(tmp_path, file_name, content,
                                                               message):
    folder = corpus_copy(tmp_path)
    (folder / file_name).write_text(content, encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_local_corpus(folder)
    assert str(caught.value).startswith(f"{folder}/{message}")
    assert "\n" not in str(caught.value)


def test_the_reward_test_rows_load_with_every_category():
    rows = read_reward_test_set(DATA / "reward_test.jsonl")
    assert len(rows) == 8 and [r.index for r in rows] == list(range(8))
    assert Counter(r.category for r in rows) == {category: 2 for category in CATEGORIES}
    assert [r.valid for r in rows] == [False, False, True, True, True, True, False, False]
    assert rows[0].pred_task is None and rows[4].pred_task.startswith("Translate the e-mail")
    assert rows[5].annotation == (False, True, True) and rows[5].help_needed
    assert rows[7].observations_json == ('[{"event": "The user types \'Dear committee,\' in a '
                                         'new document 📝.", "time": "1700500000.0"}]')
    assert [len(r.observations()) for r in rows] == [2, 1, 1, 2, 2, 3, 1, 1]


@pytest.mark.parametrize("line, message", [
    ("{not json", ":1: invalid JSON"),
    ('{"obs": [], "pred_task": null, "valid": "true", "help_needed": false, "annotation": [], '
     '"category": "False-Alarm (FA)"}', ":1: field valid: Input should be a valid boolean"),
    ('{"obs": [], "pred_task": null, "valid": true, "help_needed": false, "annotation": []}',
     ":1: field category: Field required"),
    ('{"obs": [], "pred_task": null, "valid": true, "help_needed": false, "annotation": [], '
     '"category": "Non-Response (NR)"}', ":1: unknown category 'Non-Response (NR)'"),
    ("\n\n", ": no rows (the file is empty)"),
])
def test_a_malformed_reward_file_is_refused_in_one_line(tmp_path, line, message):
    path = tmp_path / "reward.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_reward_test_set(path)
    assert str(caught.value) == f"{path}{message}"
    with pytest.raises(UserError, match="^reward test file not found: "):
        read_reward_test_set(tmp_path / "missing.jsonl")


def test_the_real_traces_and_reward_set_load(shared_data):
    events, splits = read_local_corpus(REAL / "test_data")
    assert len(events) == 233 and sum(e.task_status for e in events) == 87
    sizes = {name: sum(e.trace in traces for e in events) for name, traces in splits.items()}
    assert sizes == {"real_average": 233, "real_coding": 112, "real_writing": 121}
    raw = json.loads((REAL / "test_data" / "writing_15.json").read_text(encoding="utf-8"))
    mine = [e for e in events if e.trace == "writing_15"]
    assert [e.observation() for e in mine] == [item["observation"] for item in raw]
    rows = read_reward_test_set(REAL / "reward_data" / "test_data.jsonl")
    assert len(rows) == 120
    assert Counter(r.category for r in rows) == {category: 30 for category in CATEGORIES}
    assert sum(r.valid for r in rows) == 60
