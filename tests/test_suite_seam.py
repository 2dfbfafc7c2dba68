"""The seam holds: a suite defined only in tests/ (tiny_suite.py) runs end to end through the
CLI, the generic stages, the store and a Prefect flow, is cached like the others, and gets the
viewer, the report, the history of nights and a sweep with no change outside its own file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, Reply
from helpers import run_cli
from tiny_suite import ChainArithmetic

from proactflow.suites import get_suite, register_suite, suite_names

pytestmark = pytest.mark.usefixtures("prefect_server")

QUESTIONS = [
    {"chain": "a", "step": 0, "level": "easy", "prompt": "What is 2 + 2?", "expected": 4},
    {"chain": "a", "step": 1, "level": "hard", "prompt": "Add 3 to your last answer.",
     "expected": 7},
    {"chain": "b", "step": 0, "level": "easy", "prompt": "What is 5 + 5?", "expected": 10},
    {"chain": "b", "step": 1, "level": "hard", "prompt": "Add 3 to your last answer.",
     "expected": 13},
]


def calculator(request: dict) -> Reply:
    """Right on the first question of a chain, then adds 3 to what it said before: wrong once
    (chain b answers 10 then 12), so scores are not all one."""
    messages = request["messages"]
    if len(messages) == 1:
        left, right = re.findall(r"\d+", messages[0]["content"])  # "What is X + Y?"
        return Reply(content=str(int(left) + int(right)))
    previous = int(messages[-2]["content"])
    return Reply(content=str(previous + (3 if previous < 10 else 2)))


def test_a_suite_defined_in_tests_runs_without_touching_the_generic_code(tmp_path):
    register_suite(ChainArithmetic())
    assert "tiny" in suite_names() and get_suite("tiny").needs_judge is False
    corpus = tmp_path / "questions.json"
    corpus.write_text(json.dumps(QUESTIONS), encoding="utf-8")
    with FakeOpenAI({"calc": calculator}) as fake:
        args = ["--suite", "tiny", "--corpus", str(corpus), "--eval-model", "openai/calc",
                "--eval-api-base", fake.url, "--store", str(tmp_path / "store"),
                "--out", str(tmp_path / "out"), "--label", "chains"]
        assert run_cli("run", args) == 0
        assert fake.calls["calc"] == 4
        scores = {row["level"]: row for row in
                  json.loads((tmp_path / "out" / "scores.json").read_text())}
        assert (scores["easy"]["correct"], scores["hard"]["correct"]) == (2, 1)
        # The later question saw the model's own earlier answer.
        fake.reset_counts()
        assert run_cli("run", args) == 0
        assert fake.calls["calc"] == 0  # cached like every suite
    stored = {p.parent.name for p in (tmp_path / "store" / "artifacts").rglob("*.parquet")}
    assert stored == {"tiny_questions", "tiny_answers", "tiny_checks", "tiny_scores"}
    # The viewer shows it by the seam's defaults: a row per sample, its judgments as a table.
    assert run_cli("view", ["--store", str(tmp_path / "store"), "--out",
                            str(tmp_path / "viewer"), "--no-open"]) == 0
    page = (tmp_path / "viewer" / "index.html").read_text(encoding="utf-8")
    index = json.loads(page[page.index("const INDEX = ") + 14:page.index(";\nconst PAGE_SIZE")])
    assert [s["name"] for s in index["suites"]] == ["tiny"]
    assert [c[0] for c in index["suites"][0]["columns"]] == ["chain", "step", "level"]
    assert len(index["rows"]) == 4 and len(list((tmp_path / "viewer" / "data").iterdir())) == 4
    # Both runs are nights of series "chains" (--label), charted by the suite's history metric;
    # the same answers twice are no finding.
    assert run_cli("history", ["--store", str(tmp_path / "store"), "--series", "chains",
                               "--out", str(tmp_path / "history")]) == 0
    history = (tmp_path / "history" / "history.csv").read_text(encoding="utf-8").splitlines()
    rows = [dict(zip(history[0].split(","), line.split(","))) for line in history[1:]]
    assert {(r["group"], r["metric"], r["score"]) for r in rows} == {
        ("easy", "share correct", "1.0"), ("hard", "share correct", "0.5"),
        ("all", "share correct", "0.75")}
    assert len(rows) == 6 and "REGRESSION" not in (tmp_path / "history" / "history.html") \
        .read_text(encoding="utf-8")
    # The report gives it a section by the seam's default: its scores of each evaluation.
    assert run_cli("report", ["--store", str(tmp_path / "store"), "--out",
                              str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert '<h2 id="tiny">Chain arithmetic</h2>' in page and "viewer/index.html" in page
    board = (tmp_path / "report" / "tiny_leaderboard.csv").read_text(encoding="utf-8")
    lines = board.splitlines()
    assert lines[0].startswith("model,level,questions,correct,accuracy")
    assert [line.split(",")[1:4] for line in lines[1:]] == [["easy", "2", "2"],
                                                            ["hard", "2", "1"]]


def test_a_suite_defined_in_tests_gets_a_sweep_its_report_and_a_night(tmp_path):
    """A sweep file names the tiny suite (no judge: it has a deterministic check): the sweep
    ranks its models by the seam's defaults, writes its report page and records the night."""
    from proactflow.cache.artifacts import ArtifactStore
    from proactflow.cli import main
    from proactflow.results.history.nights import read_nights

    register_suite(ChainArithmetic())
    corpus = tmp_path / "questions.json"
    corpus.write_text(json.dumps(QUESTIONS), encoding="utf-8")
    with FakeOpenAI({"calc": calculator, "calc2": calculator}) as fake:
        config = tmp_path / "sweep.toml"
        config.write_text(f"""
suite = "tiny"
store = "{tmp_path / 'store'}"
out = "{tmp_path / 'out'}"
corpus = "{corpus}"

[[models]]
model = "openai/calc"
api_base = "{fake.url}"

[[models]]
model = "openai/calc2"
api_base = "{fake.url}"
""", encoding="utf-8")
        assert main(["sweep", "--config", str(config)]) == 0
        assert fake.calls["calc"] == 4 and fake.calls["calc2"] == 4
    lines = (tmp_path / "out" / "leaderboard.csv").read_text(encoding="utf-8").splitlines()
    assert sorted(tuple(line.split(",")[:4]) for line in lines[1:]) == [
        ("openai/calc", "easy", "2", "2"), ("openai/calc", "hard", "2", "1"),
        ("openai/calc2", "easy", "2", "2"), ("openai/calc2", "hard", "2", "1")]
    assert (tmp_path / "out" / "sweep.md").read_text(encoding="utf-8") \
        .startswith("# Chain arithmetic sweep")
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "<title>Chain arithmetic sweep</title>" in page and '<h2 id="tiny">' in page
    [night] = read_nights(ArtifactStore(tmp_path / "store"), series="sweep")
    shares = {(pair["model"], score["group"]): score["score"] for pair in night.pairs
              for score in pair["scores"] if score["metric"] == "share correct"}
    assert shares == {(model, group): share for model in ("openai/calc", "openai/calc2")
                      for group, share in (("easy", 1.0), ("hard", 0.5), ("all", 0.75))}


def test_unknown_suite_is_one_line_listing_the_known_ones(capsys):
    assert run_cli("run", ["--suite", "nope", "--eval-model", "m"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown suite 'nope'" in err[0] and "proactiveagent" in err[0]


def test_the_generic_code_names_no_benchmark():
    """stages/, flows/, schemas/ and cache/ hold nothing of a particular benchmark: no suite's
    module is imported there, and neither benchmark is named."""
    root = Path(__file__).resolve().parents[1]
    found = subprocess.run(["git", "grep", "-n", "-i", "-E",
                            r"proactbench|proactiveagent|trigger|rubric|phase_scores",
                            "--", "stages", "flows", "schemas", "cache"],
                           cwd=root, capture_output=True, text=True).stdout
    # Only the legacy names a flow parameter keeps for stores and deployments made before the
    # seam (rejudge's triggers_key) may remain.
    leftover = [line for line in found.splitlines() if not re.search(r"triggers_key", line)]
    assert leftover == []
