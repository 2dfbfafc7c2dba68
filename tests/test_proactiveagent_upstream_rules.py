"""ProactiveBench's numbers as upstream's eval/ scripts compute them, on replies and verdicts
built for the test: an event whose every attempt failed, a proposal that is not a string, a
reply cut off at the token limit, "Accepted" as a verdict, a judge that needs a third try; and
one model's published traces imported and re-judged. Every figure is checked against a hand
computation with upstream's rules (eval/script.py, judge_agent_prediction.py,
calculate_agent_performance.py at the pinned commit)."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from collections import Counter

import pytest

from fake_openai import FakeOpenAI, Reply
from helpers import run_cli
from ports import reserved_port
from proactflow.suites.proactiveagent import upstream
from replay import PROJECT_DATA
from test_proactiveagent_metrics import solve

DATA = PROJECT_DATA / "proactiveagent"
EPS = 1e-8


def upstream_metrics(tp: int, fp: int, tn: int, fn: int, total: int) -> dict[str, float]:
    recall, precision = tp / (tp + fn + EPS), tp / (tp + fp + EPS)
    return {"Recall": recall, "Precision": precision,
            "Accuracy": (tp + tn) / (tp + tn + fp + fn + EPS), "False-Alarm": fp / (tp + fp + EPS),
            "F1-Score": 2 * precision * recall / (precision + recall + EPS),
            "Accept Rate": tp / (tp + fp + EPS), "Total Events": total}


def read_csv(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


class Fakes:
    """The model under test and the judge, each following rules written for this test."""

    def __init__(self) -> None:
        self.agent_requests: list[dict] = []
        self.judge_requests: list[dict] = []
        self.asked: Counter[str] = Counter()

    def agent(self, request: dict) -> Reply:
        self.agent_requests.append(request)
        last = request["messages"][-1]["content"]
        self.asked[last] += 1
        if "searches the web" in last:  # never JSON: every attempt fails
            return Reply(content="The user is looking something up.")
        if "heading" in last and self.asked[last] == 1:  # cut off at the limit, then whole
            return Reply(content='{"Purpose": "p", "Thoughts": "the user wri',
                         finish_reason="length")
        task: object = None
        if "heading" in last:
            task = "Draft the letter"
        elif "fail" in last:
            task = "Fix the off-by-one"
        elif "PDF" in last:
            task = "Summarise the report"
        elif "spell checker" in last:
            task = False  # not a string: upstream passes it on as a proposal
        return Reply(content=json.dumps({"Purpose": "p", "Thoughts": "t",
                                         "Proactive Task": task, "Response": "null"}))

    def judge(self, request: dict) -> Reply:
        self.judge_requests.append(request)
        user = json.loads(request["messages"][1]["content"])
        last = user["Observations (Time Ascending)"][-1]["event"]
        task = user["Proposed Task"]
        key = request["messages"][1]["content"]
        self.asked[key] += 1
        if "fail with" in last and self.asked[key] <= 2:
            return Reply(content="Let me think about it first.")  # nothing to read: asked again
        if task == "Summarise the report":
            word = "Accepted"  # upstream: any value but "accepted" is a rejection
        elif task is None:
            word = "rejected" if "scrolls quickly" in last else "accepted"
        else:
            word = "rejected" if task is False else "accepted"
        return Reply(content=json.dumps({"thought": "as the user", "judgement": word}))


def run_args(fake: FakeOpenAI, store, out, *extra: str) -> list[str]:
    return ["--suite", "proactiveagent", "--corpus", str(DATA),
            "--eval-model", "openai/agent", "--eval-api-base", fake.url,
            "--judge-model", "openai/reward", "--judge-api-base", fake.url,
            "--eval-system-prompt-file", str(DATA / "agent_system_prompt.txt"),
            "--judge-prompt", str(DATA / "reward_system_prompt.txt"),
            "--prompt", f"agent_instruction={DATA / 'agent_step_instruction.txt'}",
            "--prompt", f"judge_instruction={DATA / 'reward_instruction.txt'}",
            "--store", str(store), "--out", str(out), *extra]


def test_metrics_csv_is_what_upstreams_scripts_compute_from_the_same_replies(tmp_path):
    fakes = Fakes()
    out = tmp_path / "out"
    with FakeOpenAI({"agent": fakes.agent, "reward": fakes.judge}) as fake:
        assert run_cli("run", run_args(fake, tmp_path / "store", out,
                                       "--min-coverage", "0.5")) == 0

    # By hand, with upstream's rules. coding_a: 0 null accepted (TN); 1 a task accepted (TP);
    # 2 every attempt failed, so the prediction is the test file's object and the judge
    # judges "candidate_task", accepted here: a TP; 3 null accepted (TN).
    # writing_b: 0 a task (after a cut-off reply) accepted (TP); 1-3 null accepted (TN);
    # 4 `false`, a proposal, rejected (FP). reading_c: 0 a task "Accepted": a rejection (FP);
    # 1 null rejected (FN); 2 null accepted (TN).
    expected = {"demo_coding": upstream_metrics(2, 0, 2, 0, 4),
                "demo_writing": upstream_metrics(1, 2, 4, 1, 8),
                "demo_all": upstream_metrics(3, 2, 6, 1, 12)}
    rows = {row["Category"]: row for row in read_csv(out / "metrics.csv")}
    assert set(rows) == set(expected)
    for split, values in expected.items():
        for column, value in values.items():
            assert float(rows[split][column]) == pytest.approx(value, abs=1e-12), (split, column)

    # The strict view leaves the failed event out of the counts and says how many there were.
    strict = {row["split"]: row for row in read_csv(out / "split_scores.csv")}
    coding = strict["demo_coding"]
    assert [coding[c] for c in ("events", "scored", "true_positive", "false_positive",
                                "true_negative", "false_negative", "failed_events",
                                "failed_events_accepted", "failed_events_rejected")] == \
        ["4", "3", "1", "0", "2", "0", "1", "1", "0"]
    assert float(coding["precision"]) == pytest.approx(1 / (1 + EPS))
    summary = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    assert summary["failed_events"] == {"demo_all": 1, "demo_coding": 1, "demo_writing": 0}
    events = {(e["trace"], e["event_index"]): e for e in read_csv(out / "events.csv")}
    failed = events[("coding_a", "2")]
    assert (failed["status"], failed["judged_candidate_task"], failed["accepted"]) == \
        ("invalid_reply", "true", "true")
    assert events[("writing_b", "4")]["proposed_task"] == "false"

    # What was sent: the judge saw "candidate_task" and `false` as proposals; a reply with no
    # verdict was asked again at 0, 0 then 0.5; the cut-off reply was asked again; the failed
    # event five times; no request named a token limit.
    proposals = [json.loads(r["messages"][1]["content"])["Proposed Task"]
                 for r in fakes.judge_requests]
    assert "candidate_task" in proposals and False in proposals
    retried = [r["temperature"] for r in fakes.judge_requests
               if "fail with" in json.loads(r["messages"][1]["content"])
               ["Observations (Time Ascending)"][-1]["event"]]
    assert retried == [0.0, 0.0, 0.5]
    assert sum("heading" in r["messages"][-1]["content"] for r in fakes.agent_requests) == 2
    assert sum("searches the web" in r["messages"][-1]["content"]
               for r in fakes.agent_requests) == 5
    assert all(r.get("temperature") == 0.5 for r in fakes.agent_requests)
    assert not any("max_tokens" in r for r in fakes.agent_requests + fakes.judge_requests)


def test_judge_response_format_is_refused_for_this_suite(tmp_path, capsys):
    with FakeOpenAI({"agent": Fakes().agent}) as fake:
        assert run_cli("run", run_args(fake, tmp_path / "s", tmp_path / "o",
                                       "--judge-response-format", "none")) == 2
        assert dict(fake.calls) == {}
    assert "--judge-response-format is not for the proactiveagent suite" in \
        capsys.readouterr().err


def test_offline_names_every_prompt_flag_still_missing(tmp_path, capsys, monkeypatch):
    with reserved_port() as port, FakeOpenAI({"agent": Fakes().agent}) as fake:
        monkeypatch.setenv("PROACTFLOW_PROACTIVEAGENT_URL",
                           f"http://127.0.0.1:{port}/{{commit}}/{{path}}")
        argv = ["--suite", "proactiveagent", "--corpus", str(DATA),
                "--eval-model", "openai/agent", "--eval-api-base", fake.url,
                "--judge-model", "openai/reward", "--judge-api-base", fake.url,
                "--eval-system-prompt-file", str(DATA / "agent_system_prompt.txt"),
                "--judge-prompt", str(DATA / "reward_system_prompt.txt"),
                "--store", str(tmp_path / "s"), "--dry-run"]
        assert run_cli("run", argv) == 2
    error = capsys.readouterr().err
    assert "(--prompt agent_instruction=FILE, --prompt judge_instruction=FILE)" in error
    assert "--eval-system-prompt-file" not in error and "--judge-prompt" not in error


def judged(proposal: object) -> bool:
    """The fake judge of the import test: a verdict on the proposal alone."""
    if proposal is None:
        return True
    return proposal == "candidate_task" or (isinstance(proposal, str) and len(proposal) % 3 == 0)


def reward(request: dict) -> Reply:
    """The fake reward model of the import tests: `judged` on the proposal it is shown."""
    proposal = json.loads(request["messages"][1]["content"])["Proposed Task"]
    return Reply(content=json.dumps(
        {"thought": "t", "judgement": "accepted" if judged(proposal) else "rejected"}))


def rejudge_published(fake: FakeOpenAI, corpus: Path, prompts: Path, model: str, store: Path,
                      out: Path) -> int:
    """`rejudge` of a model's imported published traces by the fake reward model, offline:
    the judge's instruction from the tests' data, the other prompts from `prompts`."""
    return run_cli("rejudge", [
        "--suite", "proactiveagent", "--corpus", str(corpus),
        "--eval-model", model, "--eval-revision", "published-traces",
        "--judge-model", "openai/reward", "--judge-api-base", fake.url,
        "--judge-prompt", str(prompts / "reward_system_prompt.txt"),
        "--prompt", f"judge_instruction={DATA / 'reward_instruction.txt'}",
        "--prompt", f"agent_system={prompts / 'agent_system_prompt.txt'}",
        "--prompt", f"agent_instruction={prompts / 'agent_step_instruction.txt'}",
        "--store", str(store), "--out", str(out), "--min-coverage", "0"])


def test_published_traces_imported_and_rejudged_give_upstreams_counts(shared_data, tmp_path,
                                                                       capsys):
    real = shared_data.parent / "proactiveagent"
    folder = real / "eval" / "traces_new" / "claude-3-5-sonnet"
    test_data = real / "dataset" / "test_data"
    store = tmp_path / "store"
    assert run_cli("import", ["--suite", "proactiveagent", str(folder), "--corpus",
                              str(test_data), "--store", str(store)]) == 0
    printed = capsys.readouterr().out
    # Every published event of the 12 test traces pairs with a test event; 6 test events are
    # newer than the traces, listed; the published traces outside the test set are listed.
    assert "claude-3-5-sonnet (revision published-traces): 227 of 233 test events imported " \
           "(21 failed upstream" in printed
    assert "6 events not in the published traces (not_imported rows): code_13:17, code_13:18, " \
           "code_13:19, code_15:0, code_16:0, writing_12:0" in printed
    assert "41 events whose published text differs (imported)" in printed

    with FakeOpenAI({"reward": reward}) as fake:
        assert rejudge_published(fake, test_data, real, "claude-3-5-sonnet", store,
                                 tmp_path / "out") == 0
        assert fake.calls["reward"] == 227  # the 6 events without a prediction: no call
        sent = [json.loads(r["messages"][1]["content"])["Observations (Time Ascending)"]
                for r in fake.requests]

    # Each prediction is judged on its own trace file's history, as upstream judged it (not on
    # the pinned test data's text, which differs for 46 events and every event after them).
    histories = set()
    for path in folder.glob("*.json"):
        events = json.loads(path.read_text(encoding="utf-8"))
        histories.update(json.dumps([e["observation"] for e in events[:i + 1]])
                         for i in range(len(events)))
    assert all(json.dumps(observations) in histories for observations in sent)

    # By hand, upstream's rules on the published files: [] is a single null, the test file's
    # object {"candidate_task": [...]} is judged as "candidate_task", each prediction counted.
    splits = json.loads((test_data / "splits.json").read_text(encoding="utf-8"))
    rows = {row["Category"]: row for row in read_csv(tmp_path / "out" / "metrics.csv")}
    for split, config in splits.items():
        tp = fp = tn = fn = total = 0
        for name in config["files"]:
            published_events = json.loads((folder / name).read_text(encoding="utf-8"))
            total += len(published_events)  # upstream counts the events its files hold
            for event in published_events:
                predictions = event["agent_response"] or [None]
                for prediction in predictions:  # iterating a dict gives its keys
                    verdict = judged(prediction)
                    tp += prediction is not None and verdict
                    fp += prediction is not None and not verdict
                    tn += prediction is None and verdict
                    fn += prediction is None and not verdict
        for column, value in upstream_metrics(tp, fp, tn, fn, total).items():
            assert float(rows[split][column]) == pytest.approx(value, abs=1e-12), (split, column)
    average = next(r for r in read_csv(tmp_path / "out" / "split_scores.csv")
                   if r["split"] == "real_average")
    assert (average["events"], average["failed_events"], average["not_imported"]) == \
        ("227", "21", "6")
    assert int(average["scored"]) == 227 - 21
    # As many proposals as the published results count (their counts solve to TP + FP = 205:
    # 184 proposed tasks and the 21 failed events).
    published = {row["Category"]: row for row in read_csv(real / "eval" / "results" /
                                                           "claude-3-5-sonnet.csv")}
    solved = solve(published["real_average"])
    proposals = sum(int(average[c]) for c in ("true_positive", "false_positive",
                                              "failed_events_accepted", "failed_events_rejected"))
    assert proposals == solved.true_positive + solved.false_positive == 205

    # The report shows the re-judged published traces beside the published numbers.
    assert run_cli("report", ["--store", str(store), "--out", str(tmp_path / "report"),
                              "--published", str(real / "eval" / "results"),
                              "--include-incomplete"]) == 0
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "claude-3-5-sonnet@published-traces judged by openai/reward" in page
    assert "claude-3-5-sonnet (published)" in page


def test_hand_made_published_traces_imported_and_rejudged(tmp_path, capsys, monkeypatch):
    """Every shape upstream's scripts read, in traces written for the test: [] (a null), the
    string "null" and an object (proposals), false, the test file's object (a failed event), an
    event whose text changed, an event the trace lacks, a trace missing and one extra."""
    def sha(name: str) -> str:
        return hashlib.sha256((DATA / name).read_bytes()).hexdigest()

    # The tests' stand-in agent prompts play upstream's, whose hashes key imported responses.
    monkeypatch.setitem(upstream.PROMPT_SHA256, "agent_system", sha("agent_system_prompt.txt"))
    monkeypatch.setitem(upstream.PROMPT_SHA256, "step_instruction",
                        sha("agent_step_instruction.txt"))
    folder = tmp_path / "traces_new" / "some-model"
    folder.mkdir(parents=True)

    def published(trace: str, predictions: list, skip_first: bool = False,
                  changed: int | None = None) -> None:
        events = json.loads((DATA / f"{trace}.json").read_text(encoding="utf-8"))
        events = events[1:] if skip_first else events
        out = []
        for index, (event, prediction) in enumerate(zip(events, predictions)):
            observation = dict(event["observation"])
            if index == changed:
                observation["event"] = "An older wording of this event."
            out.append({"observation": observation, "agent_response": prediction,
                        "task_status": event["task_status"],
                        "other_infomation": {"Purpose": "p", "Thoughts": "t", "Response": None}})
        (folder / f"{trace}.json").write_text(json.dumps(out), encoding="utf-8")

    published("coding_a", [[], ["Fix the test"], {"candidate_task": ["old"]}, ["null"]])
    published("writing_b", [[{"step": "translate"}], ["Translate it"], [], [False]],
              skip_first=True, changed=1)
    (folder / "extra_trace.json").write_text(json.dumps([]), encoding="utf-8")
    store = tmp_path / "store"
    assert run_cli("import", ["--suite", "proactiveagent", str(folder), "--corpus", str(DATA),
                              "--store", str(store)]) == 0
    printed = capsys.readouterr().out
    assert "some-model (revision published-traces): 8 of 12 test events imported " \
           "(1 failed upstream" in printed
    assert "1 events whose published text differs (imported): writing_b:2" in printed
    assert "4 events not in the published traces (not_imported rows): reading_c:0, " \
           "reading_c:1, reading_c:2, writing_b:0" in printed
    assert "1 test traces without a published file: reading_c" in printed
    assert "1 published traces not in the test data (not imported): extra_trace" in printed

    with FakeOpenAI({"reward": reward}) as fake:
        assert rejudge_published(fake, DATA, DATA, "some-model", store, tmp_path / "out") == 0
        seen = [json.loads(r["messages"][1]["content"])["Proposed Task"] for r in fake.requests]
    assert sorted(map(json.dumps, seen)) == sorted(map(json.dumps, [
        None, "Fix the test", "candidate_task", "null", {"step": "translate"}, "Translate it",
        None, False]))
    # By hand: coding_a: null accepted (TN), "Fix the test" accepted (TP), "candidate_task"
    # accepted (TP), "null" (a proposal) rejected (FP). writing_b: the object rejected (FP),
    # "Translate it" accepted (TP), null accepted (TN), false rejected (FP). reading_c: none,
    # and no published file: upstream's Total Events counts the events its files hold.
    expected = {"demo_coding": upstream_metrics(2, 1, 1, 0, 4),
                "demo_writing": upstream_metrics(1, 2, 1, 0, 4),
                "demo_all": upstream_metrics(3, 3, 2, 0, 8)}
    rows = {row["Category"]: row for row in read_csv(tmp_path / "out" / "metrics.csv")}
    for split, values in expected.items():
        for column, value in values.items():
            assert float(rows[split][column]) == pytest.approx(value, abs=1e-12), (split, column)
    events = {(e["trace"], e["event_index"]): e for e in read_csv(tmp_path / "out" / "events.csv")}
    assert events[("reading_c", "1")]["status"] == "not_imported"
    assert events[("writing_b", "2")]["proposed_task"] == "Translate it"
