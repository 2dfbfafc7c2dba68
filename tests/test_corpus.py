"""Corpus validation: every mistake is one line naming file, line and field; nothing is stored."""

from __future__ import annotations

import json

import polars as pl
import pytest

from fake_openai import FakeOpenAI
from helpers import cli_args, run_cli
from proactflow.common.errors import CorpusError
from proactflow.suites.proactbench.triggers import build_triggers
from proactflow.suites.sources import read_corpus_file
from replay import ANSWERABLE, DIALOGUES, SAMPLE_CORPUS, SHARED_CORPUS, TRIGGERS

LINES = SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()


def write_corpus(tmp_path, lines, name="corpus.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def mutate(line: str, change) -> str:
    row = json.loads(line)
    change(row)
    return json.dumps(row, ensure_ascii=False)


def test_sample_corpus_loads():
    rows, revision = read_corpus_file(SAMPLE_CORPUS)
    assert len(rows) == DIALOGUES
    assert revision.startswith("sha256:") and len(revision) == 7 + 64
    triggers = build_triggers(rows)
    assert triggers.height == TRIGGERS
    assert triggers.group_by("phase").len().sort("phase").rows() == \
        [("CRITICAL", 4), ("EMERGENT", 3), ("RECOVERY", 3)]
    assert triggers.filter(~pl.col("evaluable"))["unevaluable_reason"].to_list() == \
        ["no user message at turn 3"]
    assert triggers.filter(pl.col("evaluable")).height == ANSWERABLE


def test_the_benchmarks_sample_loads(shared_data):
    rows, _ = read_corpus_file(SHARED_CORPUS)
    assert len(rows) == 12
    assert build_triggers(rows).group_by("phase").len().sort("phase").rows() == \
        [("CRITICAL", 16), ("EMERGENT", 12), ("RECOVERY", 12)]


def _missing_field(row):
    del row["trigger_points"][1]["evaluation_rubric"]["pass_criteria"]


def _duplicate_trigger_turn(row):
    row["trigger_points"].append(dict(row["trigger_points"][0]))


def _unknown_type(row):
    row["trigger_points"][0]["evaluation_rubric"]["type"] = "SURPRISE"


@pytest.mark.parametrize("make_lines, line, fragment", [
    (lambda: [LINES[0], LINES[1][: len(LINES[1]) // 2]], 2, "invalid JSON"),
    (lambda: [LINES[0], LINES[1], mutate(LINES[2], _missing_field)], 3,
     "field trigger_points.1.evaluation_rubric.pass_criteria: Field required"),
    (lambda: [mutate(LINES[0], _unknown_type)], 1,
     "field trigger_points.0.evaluation_rubric.type: Input should be"),
    (lambda: [LINES[0], LINES[1], LINES[0]], 3, "duplicate unique_id_eval"),
    (lambda: [LINES[0], mutate(LINES[1], _duplicate_trigger_turn)], 2,
     "field trigger_points: Value error, two trigger points at turn"),
    (lambda: [LINES[0], "[1, 2]"], 2, "expected a JSON object"),
])
def test_bad_lines_name_file_line_and_field(tmp_path, make_lines, line, fragment):
    path = write_corpus(tmp_path, make_lines())
    with pytest.raises(CorpusError) as caught:
        read_corpus_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ")
    assert fragment in message
    assert "\n" not in message


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(CorpusError, match="empty"):
        read_corpus_file(path)


def test_non_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(LINES[0].encode() + b"\n" + "caf\u00e9".encode("latin-1") + b"\n")
    with pytest.raises(CorpusError, match=r":2: not valid UTF-8"):
        read_corpus_file(path)


def test_cli_reports_bad_corpus_in_one_line_and_writes_nothing(tmp_path, capsys,
                                                                prefect_server):
    path = write_corpus(tmp_path, [LINES[0], mutate(LINES[1], _unknown_type)])
    store = tmp_path / "store"
    with FakeOpenAI() as fake:
        assert run_cli("run", cli_args(fake, store, corpus=path)) == 2
        assert sum(fake.calls.values()) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"proactflow: error: {path}:2: field trigger_points.0")
    assert not (store / "artifacts").exists()


def test_trigger_without_user_message_is_kept_and_marked(tmp_path):
    def drop_user_message(row):
        turn = row["trigger_points"][1]["turn"]
        for record in row["turn_records"]:
            if record["turn"] == turn:
                record["user_message"] = None

    path = write_corpus(tmp_path, [mutate(LINES[0], drop_user_message)])
    rows, _ = read_corpus_file(path)
    triggers = build_triggers(rows)
    assert triggers.height == len(json.loads(LINES[0])["trigger_points"])
    marked = triggers.filter(~triggers["evaluable"])
    assert marked.height == 1
    assert marked["unevaluable_reason"][0].startswith("no user message at turn")


def test_limit_and_phases():
    rows, _ = read_corpus_file(SAMPLE_CORPUS)
    triggers = build_triggers(rows, limit=2, phases=["RECOVERY"])
    assert triggers["phase"].unique().to_list() == ["RECOVERY"]
    assert triggers["unique_id_eval"].n_unique() == 2
