"""Proactive Agent's ProactiveBench end to end through the suite seam: the CLI, a fake agent and
a fake reward model over real HTTP, on the project's own traces (tests/data/proactiveagent)."""

from __future__ import annotations

import csv
import json

import pytest

from fake_openai import FakeOpenAI, Reply
from helpers import run_cli
from replay import PROJECT_DATA

DATA = PROJECT_DATA / "proactiveagent"
EPS = 1e-8


def proposes(event: str) -> bool:
    return any(word in event for word in ("fail", "spell", "copies", "PDF"))


def agent(request: dict) -> Reply:
    """Proposes a task at some events, never answers JSON at one, fences one reply."""
    last = request["messages"][-1]["content"]
    if "searches the web" in last:
        return Reply(content="I think the user is searching.")
    body = json.dumps({"Purpose": "p", "Thoughts": "t",
                       "Proactive Task": "Help with it" if proposes(last) else None,
                       "Response": "null"})
    return Reply(content=f"```json\n{body}\n```" if "copies" in last else body)


def accepts(last_event: str, task: str | None) -> bool:
    if task is not None:
        return any(word in last_event for word in ("fail", "copies"))
    return not any(word in last_event for word in ("spell", "scrolls quickly"))


def reward_model(request: dict) -> Reply:
    user = json.loads(request["messages"][1]["content"])
    verdict = accepts(user["Observations (Time Ascending)"][-1]["event"], user["Proposed Task"])
    return Reply(content=json.dumps({"thought": "as the user I would",
                                     "judgement": "accepted" if verdict else "rejected"}))


@pytest.fixture
def served():
    requests: list[dict] = []

    def recording_agent(request: dict) -> Reply:
        requests.append(request)
        return agent(request)

    with FakeOpenAI({"agent": recording_agent, "reward": reward_model}) as fake:
        yield fake, requests


def args(fake: FakeOpenAI, store, out, *extra: str) -> list[str]:
    return ["--suite", "proactiveagent", "--corpus", str(DATA),
            "--eval-model", "openai/agent", "--eval-api-base", fake.url,
            "--judge-model", "openai/reward", "--judge-api-base", fake.url,
            "--eval-system-prompt-file", str(DATA / "agent_system_prompt.txt"),
            "--judge-prompt", str(DATA / "reward_system_prompt.txt"),
            "--prompt", f"agent_instruction={DATA / 'agent_step_instruction.txt'}",
            "--prompt", f"judge_instruction={DATA / 'reward_instruction.txt'}",
            "--store", str(store), "--out", str(out), *extra]


def traces() -> dict[str, list[dict]]:
    splits = json.loads((DATA / "splits.json").read_text(encoding="utf-8"))
    names = {name for split in splits.values() for name in split["files"]}
    return {name[:-5]: json.loads((DATA / name).read_text(encoding="utf-8"))
            for name in sorted(names)}


def test_each_event_sees_the_protocol_messages_with_the_models_own_replies(served, tmp_path):
    fake, requests = served
    assert run_cli("run", args(fake, tmp_path / "s", tmp_path / "o", "--min-coverage",
                               "0.5")) == 0
    system = (DATA / "agent_system_prompt.txt").read_text(encoding="utf-8")
    instruction = (DATA / "agent_step_instruction.txt").read_text(encoding="utf-8")

    def bare(observation: dict) -> str:
        return json.dumps({"Time": observation["time"], "Event": observation["event"]})

    def wrapped(observation: dict) -> str:
        return json.dumps({"Instructions": instruction, "Observation": "@"}).replace(
            "@", bare(observation))

    by_last = {request["messages"][-1]["content"]: request["messages"] for request in requests}
    # coding_a, built by hand: event 2's reply is never JSON, so it stays wrapped and
    # unanswered in the history of event 3; the other events' replies are the assistant turns
    # as upstream stores them (json.dumps of the parsed reply, the "null" Response as null).
    events = [e["observation"] for e in traces()["coding_a"]]

    def reply(task):
        return json.dumps({"Purpose": "p", "Thoughts": "t", "Proactive Task": task,
                           "Response": None})

    expected = [{"role": "system", "content": system},
                {"role": "user", "content": bare(events[0])},
                {"role": "assistant", "content": reply(None)},
                {"role": "user", "content": bare(events[1])},
                {"role": "assistant", "content": reply("Help with it")},
                {"role": "user", "content": wrapped(events[2])},
                {"role": "user", "content": wrapped(events[3])}]
    assert by_last[wrapped(events[3])] == expected
    assert by_last[wrapped(events[0])] == [expected[0], {"role": "user",
                                                         "content": wrapped(events[0])}]
    # The invalid reply was asked again (5 tries, upstream's), then recorded as such, never
    # dropped; neither request names a token limit.
    assert sum(r["messages"][-1]["content"] == wrapped(events[2]) for r in requests) == 5
    assert all("max_tokens" not in r for r in requests)


def hand_metrics() -> dict[str, dict[str, float]]:
    """metrics.csv computed by hand from the fakes' rules and upstream's formulas."""
    splits = json.loads((DATA / "splits.json").read_text(encoding="utf-8"))
    all_traces = traces()
    out = {}
    for split, config in splits.items():
        tp = fp = tn = fn = total = 0
        for name in config["files"]:
            for event in all_traces[name[:-5]]:
                total += 1
                text = event["observation"]["event"]
                # An invalid reply: upstream keeps the test file's object as the prediction and
                # its judge judges the literal "candidate_task", a proposal.
                task = "candidate_task" if "searches the web" in text else \
                    "Help with it" if proposes(text) else None
                good = accepts(text, task)
                tp += task is not None and good
                fp += task is not None and not good
                tn += task is None and good
                fn += task is None and not good
        recall, precision = tp / (tp + fn + EPS), tp / (tp + fp + EPS)
        out[split] = {"Recall": recall, "Precision": precision,
                      "Accuracy": (tp + tn) / (tp + tn + fp + fn + EPS),
                      "False-Alarm": fp / (tp + fp + EPS),
                      "F1-Score": 2 * precision * recall / (precision + recall + EPS),
                      "Accept Rate": tp / (tp + fp + EPS), "Total Events": total}
    return out


def test_metrics_csv_equals_a_hand_computation_and_a_rerun_retries_only_failures(served,
                                                                                  tmp_path):
    fake, _ = served
    store, out = tmp_path / "store", tmp_path / "out"
    # An event lost to an invalid reply makes the run fail unless accepted.
    assert run_cli("run", args(fake, store, out)) == 1
    with open(out / "metrics.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["Category", "Recall", "Precision", "Accuracy", "False-Alarm",
                             "F1-Score", "Accept Rate", "Total Events"]
    expected = hand_metrics()
    assert [row["Category"] for row in rows] == sorted(expected)
    for row in rows:
        for column, value in expected[row["Category"]].items():
            assert float(row[column]) == pytest.approx(value, abs=1e-12), (row["Category"],
                                                                           column)
    events = list(csv.DictReader(open(out / "events.csv", newline="", encoding="utf-8")))
    assert len(events) == 12
    invalid = [e for e in events if e["status"] != "scored"]
    assert [(e["trace"], e["event_index"], e["status"]) for e in invalid] == \
        [("coding_a", "2", "invalid_reply")]
    assert invalid[0]["message"].startswith("invalid model reply: not JSON")
    split_scores = list(csv.DictReader(open(out / "split_scores.csv", encoding="utf-8")))
    coding = next(r for r in split_scores if r["split"] == "demo_coding")
    # The strict view leaves the failed event out, and says so; it was judged (rejected: its
    # observation names no failure), as upstream judges it.
    assert (coding["events"], coding["scored"], coding["invalid_replies"],
            coding["failed_events"], coding["failed_events_accepted"],
            coding["failed_events_rejected"]) == ("4", "3", "1", "1", "0", "1")
    assert (invalid[0]["judged_candidate_task"], invalid[0]["accepted"]) == ("true", "false")
    assert float(coding["f1_ci_low"]) <= float(coding["f1"]) <= float(coding["f1_ci_high"])

    fake.reset_counts()
    assert run_cli("run", args(fake, store, out, "--min-coverage", "0.9")) == 0
    # The event whose replies never parsed keeps its 5 paid attempts: the same run asks
    # nothing again; with more attempts allowed, only that event is asked, once per new
    # attempt, and its judge call on "candidate_task" is cached.
    assert dict(fake.calls) == {}
    assert run_cli("run", args(fake, store, out, "--min-coverage", "0.9",
                               "--eval-attempts", "7")) == 0
    assert dict(fake.calls) == {"agent": 2}


def calibration_verdict(last: str, task: str | None) -> bool:
    return ("error" in last) if task is not None else ("music" in last)


def calibration_judge(request: dict) -> Reply:
    """Accepts a proposal when the last observation mentions an error, accepts a null when it
    mentions music; answers prose on train timetables, "Accepted" (capitalised) on the
    translator, and its verdict in a ```json fence after prose on the calendar; nothing on the
    news site, and a reply cut off at the token limit after its verdict on the print
    statement."""
    user = json.loads(request["messages"][1]["content"])
    last = user["Observations (Time Ascending)"][-1]["event"]
    if "timetables" in last:
        return Reply(content="Let me think about it.")
    if "news site" in last:
        return Reply(content="")
    word = "accepted" if calibration_verdict(last, user["Proposed Task"]) else "rejected"
    if "translator" in last:
        word = word.capitalize()
    body = json.dumps({"thought": "t", "judgement": word})
    if "print statement" in last:
        return Reply(content=body + ', "more": "cut', finish_reason="length")
    return Reply(content=f"Here it is:\n```json\n{body}\n```" if "calendar" in last else body)


def test_calibration_reproduces_the_authors_arithmetic_on_labels_built_for_the_test(tmp_path):
    rows = [json.loads(line) for line in
            (DATA / "reward_test.jsonl").read_text(encoding="utf-8").splitlines() if line]
    with FakeOpenAI({"candidate": calibration_judge}) as fake:
        argv = ["--corpus", str(DATA / "reward_test.jsonl"), "--judge-model", "openai/candidate",
                "--judge-api-base", fake.url, "--judge-prompt",
                str(DATA / "reward_system_prompt.txt"),
                "--prompt", f"judge_instruction={DATA / 'reward_instruction.txt'}",
                "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out"),
                "--min-coverage", "0"]
        assert run_cli("calibrate", argv) == 0
        # Upstream's scoring script asks once: a reply without a verdict has none, and is
        # kept (never asked again), an empty or cut-off one too.
        assert dict(fake.calls) == {"candidate": len(rows)}, dict(fake.calls)
        fake.reset_counts()
        assert run_cli("calibrate", argv) == 0
        assert dict(fake.calls) == {}
    # The authors' arithmetic, by hand: a verdict read as their script reads it (json.loads,
    # else the expression anywhere: the fenced one is found; "Accepted" is none); accepted is
    # the positive class against `valid`; a missing verdict never agrees and counts as a
    # rejection.
    verdicts = []
    for row in rows:
        last = row["obs"][-1]["event"]
        verdict = None if any(word in last for word in ("timetables", "translator",
                                                        "news site")) else \
            calibration_verdict(last, row["pred_task"])
        verdicts.append((row["category"], row["valid"], verdict))
    assert sum(v is None for _, _, v in verdicts) == 3
    assert any("calendar" in row["obs"][-1]["event"] for row in rows)
    tp = sum(bool(v) and valid for _, valid, v in verdicts)
    fp = sum(bool(v) and not valid for _, valid, v in verdicts)
    fn = sum(not v and valid for _, valid, v in verdicts)
    tn = sum(not v and not valid for _, valid, v in verdicts)
    table = {row["category"]: row for row in
             csv.DictReader(open(tmp_path / "out" / "calibration.csv", encoding="utf-8"))}
    overall = table["ALL"]
    assert float(overall["accuracy"]) == pytest.approx((tp + tn) / len(rows))
    assert float(overall["precision"]) == pytest.approx(tp / (tp + fp))
    assert float(overall["recall"]) == pytest.approx(tp / (tp + fn))
    assert float(overall["f1"]) == pytest.approx(2 * tp / (2 * tp + fp + fn))
    assert (int(overall["no_verdict"]), int(overall["judge_errors"])) == (3, 0)
    for category in {c for c, _, _ in verdicts}:
        mine = [(valid, v) for c, valid, v in verdicts if c == category]
        agree = sum(v is not None and v == valid for valid, v in mine) / len(mine)
        assert float(table[category]["agreement"]) == pytest.approx(agree), category


def test_a_sweep_file_names_its_suite_and_gets_that_suites_leaderboard_and_report(
        tmp_path, prefect_server):
    from proactflow.cli import main

    with FakeOpenAI({"agent": agent, "other": agent, "reward": reward_model}) as fake:
        config = tmp_path / "sweep.toml"
        config.write_text(f"""
suite = "proactiveagent"
store = "{tmp_path / 'store'}"
out = "{tmp_path / 'out'}"
corpus = "{DATA}"
min_coverage = 0.5

[prompts]
agent_system = "{DATA / 'agent_system_prompt.txt'}"
agent_instruction = "{DATA / 'agent_step_instruction.txt'}"
judge = "{DATA / 'reward_system_prompt.txt'}"
judge_instruction = "{DATA / 'reward_instruction.txt'}"

[[judges]]
model = "openai/reward"
api_base = "{fake.url}"

[[models]]
model = "openai/agent"
api_base = "{fake.url}"

[[models]]
model = "openai/other"
api_base = "{fake.url}"
""", encoding="utf-8")
        assert main(["sweep", "--config", str(config)]) == 0
    board = list(csv.DictReader(open(tmp_path / "out" / "leaderboard.csv", encoding="utf-8")))
    assert {(row["model"], row["split"]) for row in board} == {
        (model, split) for model in ("openai/agent", "openai/other")
        for split in ("demo_all", "demo_coding", "demo_writing")}
    summary = (tmp_path / "out" / "sweep.md").read_text(encoding="utf-8")
    assert summary.startswith("# ProactiveBench (Proactive Agent) sweep") and "openai/other" in summary
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "ProactiveBench (Proactive Agent)" in page and "F1 per split" in page
    # The night is recorded in the history with the suite's own figure: F1 per split.
    from proactflow.cache.artifacts import ArtifactStore
    from proactflow.results.history.nights import read_nights

    [night] = read_nights(ArtifactStore(tmp_path / "store"), series="sweep")
    f1 = {(pair["model"], score["group"]): score["score"] for pair in night.pairs
          for score in pair["scores"] if score["metric"] == "F1"}
    assert f1 == pytest.approx({(row["model"], row["split"]): float(row["f1"])
                                for row in board})


def test_report_shows_measured_rows_and_published_numbers_labelled(served, tmp_path):
    fake, _ = served
    store = tmp_path / "store"
    assert run_cli("run", args(fake, store, tmp_path / "out", "--min-coverage", "0.5")) == 0
    published = tmp_path / "published"
    published.mkdir()
    (published / "some-model.csv").write_text(
        "Category,Recall,Precision,Accuracy,False-Alarm,F1-Score,Accept Rate,Total Events\n"
        "real_average,0.5,0.25,0.4,0.75,0.3333,0.25,227\n", encoding="utf-8")
    assert run_cli("report", ["--store", str(store), "--out", str(tmp_path / "report"),
                              "--published", str(published), "--include-incomplete"]) == 0
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "openai/agent judged by openai/reward" in page
    assert 'class="published"' in page and "some-model (published)" in page
    board = list(csv.DictReader(open(tmp_path / "report" / "proactiveagent_leaderboard.csv",
                                     encoding="utf-8")))
    assert {row["split"] for row in board} == {"demo_all", "demo_coding", "demo_writing"}


def test_runs_on_the_benchmarks_own_test_set(shared_data, served, tmp_path):
    """The 12 real traces (233 events) and the real agent prompts from ../shared; the judge's
    closing instruction is not among the shared files, so the tests' stand-in is used."""
    fake, requests = served
    real = shared_data.parent / "proactiveagent"
    folder = real / "dataset" / "test_data"
    argv = ["--suite", "proactiveagent", "--corpus", str(folder),
            "--eval-model", "openai/agent", "--eval-api-base", fake.url,
            "--judge-model", "openai/reward", "--judge-api-base", fake.url,
            "--eval-system-prompt-file", str(real / "agent_system_prompt.txt"),
            "--judge-prompt", str(real / "reward_system_prompt.txt"),
            "--prompt", f"agent_instruction={real / 'agent_step_instruction.txt'}",
            "--prompt", f"judge_instruction={DATA / 'reward_instruction.txt'}",
            "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out"),
            "--concurrency", "12", "--min-coverage", "0.5"]
    assert run_cli("run", argv) == 0
    totals = {row["Category"]: row["Total Events"] for row in
              csv.DictReader(open(tmp_path / "out" / "metrics.csv", encoding="utf-8"))}
    assert totals == {"real_average": "233", "real_coding": "112", "real_writing": "121"}
    # Event 5 of code_11, byte for byte: the real system prompt, events 0-4 bare with the
    # model's own replies, then event 5 wrapped in the real step instruction.
    events = [e["observation"] for e in
              json.loads((folder / "code_11.json").read_text(encoding="utf-8"))]
    system = (real / "agent_system_prompt.txt").read_text(encoding="utf-8")
    instruction = (real / "agent_step_instruction.txt").read_text(encoding="utf-8")

    def bare(o):
        return json.dumps({"Time": o["time"], "Event": o["event"]})

    def answer(o):
        reply = json.loads(agent({"messages": [{"content": bare(o)}]}).content
                           .removeprefix("```json\n").removesuffix("\n```"))
        reply["Response"] = None
        return json.dumps(reply)

    expected = [{"role": "system", "content": system}]
    for o in events[:5]:
        assert "searches the web" not in o["event"]
        expected += [{"role": "user", "content": bare(o)},
                     {"role": "assistant", "content": answer(o)}]
    wrapped = json.dumps({"Instructions": instruction, "Observation": "@"}).replace(
        "@", bare(events[5]))
    expected.append({"role": "user", "content": wrapped})
    assert [r["messages"] for r in requests if r["messages"][-1]["content"] == wrapped] == \
        [expected]
