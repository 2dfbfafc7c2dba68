"""Every suite's nights in the history: its own figure per group with an interval over its own
unit (Proactive Agent's F1 per split resampling traces, the multimodal suite's acc per dataset
resampling samples, the video suite's PAUC per part resampling samples), the same figure its own
scores table gives, no finding between identical nights, and a regression with the samples that
changed verdict when the model's answers got worse.

Each night's judgments table is made of the suite's own row models (the table a run stores),
recorded as a sweep records it (history.pair_entry with the suite) in a store on disk."""

from __future__ import annotations

import json
import types
import typing
from datetime import datetime, timezone
from typing import Any, Callable

import polars as pl
import pytest
from pydantic import BaseModel

from proactflow.cache.artifacts import ArtifactStore
from proactflow.results.history.nights import pair_entry, read_nights, write_night
from proactflow.results.history.page import write_history
from proactflow.results.history.scores import all_findings, history_table
from proactflow.schemas.arrow import to_frame
from proactflow.suites import get_suite
from proactflow.suites.proactiveagent.tables import VerdictRow
from proactflow.suites.proactivebench_mllm.tables import OutcomeRow
from proactflow.suites.proactivebench_video.tables import TurnRow


def _blank(annotation: Any) -> Any:
    """A value of a field's type (None where the field takes it)."""
    if type(None) in typing.get_args(annotation) or annotation is type(None):
        return None
    origin = typing.get_origin(annotation)
    if origin is list:
        return []
    if origin is typing.Literal:
        return typing.get_args(annotation)[0]
    if isinstance(annotation, types.UnionType):
        return None
    return {str: "", int: 0, float: 0.0, bool: False}[annotation]


def table(model: type[BaseModel], rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The suite's stored table of these rows (the fields a row does not give: blank)."""
    blank = {name: _blank(info.annotation) for name, info in model.model_fields.items()}
    return to_frame([model.model_validate({**blank, **row}) for row in rows], model)


def record_nights(store: ArtifactStore, suite_name: str, nights: list[pl.DataFrame],
                  judge: str) -> list:
    """Each judgments table a night of series "nightly", one a day from 2026-11-01, as a
    sweep records it; returns the series as read back."""
    suite = get_suite(suite_name)
    for day, judgments in enumerate(nights, start=1):
        entry = pair_entry(suite, "openai/m", judge, f"ckpt-{day}", f"j{day}", f"r{day}",
                           pl.DataFrame({"status": ["ok"]}), judgments)
        write_night(store, "nightly", suite_name, datetime(2026, 11, day, 2, tzinfo=timezone.utc),
                    f"run{day:05d}", [entry], {"report": None, "viewer": None},
                    {"regression_threshold": 0.0})
    return read_nights(store, series="nightly")


def check_series(tmp_path, suite_name: str, good: pl.DataFrame, bad: pl.DataFrame,
                 judge: str, own_figure: Callable[[pl.DataFrame], dict[str, float]],
                 changed: set[str], metric: str) -> pl.DataFrame:
    """Nights good, good, bad: the figures are the suite's own, a regression on night 3 only
    (in every group), with exactly `changed` as its changed samples in the overall group."""
    nights = record_nights(ArtifactStore(tmp_path / "store"), suite_name, [good, good, bad],
                           judge)
    history = history_table(nights)
    assert set(history["metric"]) == {metric}
    for day, judgments in ((1, good), (3, bad)):
        night = history.filter(pl.col("night").str.starts_with(f"2026-11-0{day}"))
        figures = dict(zip(night["group"], night["score"]))
        assert figures == pytest.approx(own_figure(judgments)), day
        assert (night["ci_low"] <= night["score"] + 1e-9).all() and \
            (night["score"] <= night["ci_high"] + 1e-9).all()
    findings = all_findings(nights)
    assert findings, "the regression of night 3 was not found"
    assert {(f.after[:10], f.kind) for f in findings} == {("2026-11-03", "regression")}
    assert {f.group for f in findings} == set(history["group"])
    overall = next(f for f in findings if f.group in ("all", "OVERALL", "demo_all"))
    assert overall.ci_high < 0 and overall.metric == metric
    assert {c["sample"] for c in overall.changed} == changed
    # Identical nights: nothing, at any threshold.
    assert not all_findings(nights[:2])
    pages = write_history(tmp_path / "history", history, findings)
    page = open(pages["history.html"], encoding="utf-8").read()
    assert page.count("<svg") == history["group"].n_unique() and f"({metric})" in page
    # Each tick says its night's time under its date, and each chart's numbers follow it.
    assert page.count(">2026-11-03<tspan") == page.count("<svg") and ">02:00</tspan>" in page
    assert page.count("the chart's numbers") == page.count("<svg")
    assert page.count("<td>2026-11-03 02:00</td>") == page.count("<svg") + 1  # + nights table
    return history


# Proactive Agent: F1 per split from confusion counts, resampling traces.

TRACES = [f"t{i:02d}" for i in range(12)]


def verdicts(proposals: list[tuple[bool, bool]]) -> pl.DataFrame:
    """Each trace's events with these (proposed, accepted) verdicts; the last trace's first
    event lost to the judge (never scored, never compared)."""
    rows = []
    for number, trace in enumerate(TRACES):
        for index, (proposed, accepted) in enumerate(proposals):
            lost = number == len(TRACES) - 1 and index == 0
            rows.append({"trace": trace, "event_index": index, "model": "openai/m",
                         "judge": "openai/reward", "judge_prompt_sha256": "p",
                         "splits": ["demo_all", "even" if number % 2 == 0 else "odd"],
                         "status": "judge_error" if lost else "scored",
                         "proposed": None if lost else proposed,
                         "accepted": None if lost else accepted})
    return table(VerdictRow, rows)


def test_proactive_agent_f1_per_split(tmp_path):
    suite = get_suite("proactiveagent")
    good = verdicts([(True, True), (False, True), (True, True), (False, False), (True, False)])
    bad = verdicts([(True, False), (False, True), (True, True), (False, False), (True, False)])

    def own(judgments: pl.DataFrame) -> dict[str, float]:
        scores = suite.score(judgments)
        return dict(zip(scores["split"], scores["f1"]))

    history = check_series(tmp_path, "proactiveagent", good, bad, "openai/reward", own,
                           {f"{t}|0|0" for t in TRACES[:-1]}, "F1")
    assert set(history["group"]) == {"demo_all", "even", "odd"}
    assert history.filter(group="demo_all")["evaluated"].to_list() == [59, 59, 59]


# The multimodal ProactiveBench: MCQA acc per dataset, resampling samples.

def endings(correct: Callable[[str, int], bool]) -> pl.DataFrame:
    rows = []
    for dataset in ("ROD", "VSOD", "QD"):
        for sample_id in range(8):
            right = correct(dataset, sample_id)
            for step in (0, 1):
                final = step == 1
                rows.append({"dataset": dataset, "sample_id": sample_id, "step": step,
                             "model": "openai/m", "judge": "rules", "mode": "mcqa",
                             "final": final, "status": "scored",
                             "stop_reason": ("correct" if right else "wrong") if final else None,
                             "correct_prediction": right if final else None,
                             "num_turns": 2 if final else None})
    return table(OutcomeRow, rows)


def test_multimodal_acc_per_dataset(tmp_path):
    suite = get_suite("proactivebench-mllm")
    good = endings(lambda dataset, sample: sample != 7)
    bad = endings(lambda dataset, sample: sample in (0, 7))

    def own(judgments: pl.DataFrame) -> dict[str, float]:
        scores = suite.score(judgments)
        return {row["dataset"]: row["acc"] / 100 for row in scores.iter_rows(named=True)}

    history = check_series(tmp_path, "proactivebench-mllm", good, bad, "rules", own,
                           {f"{d}|{s}|0" for d in ("ROD", "VSOD", "QD") for s in range(1, 8)},
                           "headline (MCQA acc, OEG agg)")
    assert set(history["variant"]) == {"mcqa"}
    assert all_findings(read_nights(ArtifactStore(tmp_path / "store")))[0].variant == "mcqa"


# The video ProactiveBench: PAUC at omega 0.5 per part, resampling samples.

def turns(pauc: Callable[[str, int, int], float]) -> pl.DataFrame:
    rows = []
    for part in ("WEB", "EGO"):
        for number in range(8):
            for turn in (0, 1):
                value = pauc(part, number, turn)
                rows.append({"part": part, "question_id": f"q{number}", "turn": turn,
                             "model": "openai/m", "judge": "openai/grader",
                             "judge_prompt_sha256": "p", "status": "scored",
                             "final_score": 3 if value > 0.5 else 1, "pauc_0": value,
                             "pauc_0.5": value, "pauc_1": value, "judged": 1})
    return table(TurnRow, rows)


def test_video_pauc_per_part(tmp_path):
    suite = get_suite("proactivebench-video")
    good = turns(lambda part, number, turn: 0.8 if turn == 0 else 0.6)
    bad = turns(lambda part, number, turn: 0.2 if turn == 0 else 0.6)

    def own(judgments: pl.DataFrame) -> dict[str, float]:
        scores = suite.score(judgments)
        return {row["part"]: row["pauc_0.5"] / 100 for row in scores.iter_rows(named=True)}

    check_series(tmp_path, "proactivebench-video", good, bad, "openai/grader", own,
                 {f"{p}|q{n}|0|0" for p in ("WEB", "EGO") for n in range(8)},
                 "PAUC at omega 0.5")


# A regression side by side: the viewer of the two nights, only the samples that changed.

def test_the_changed_samples_of_a_regression_side_by_side(tmp_path, prefect_server):
    """Two labelled runs of Proactive Agent's suite (the agent stops proposing on the second);
    the side-by-side page of their finding holds the traces whose verdicts changed, each with
    both nights' replies and verdicts, and every changed sample links to its trace there."""
    import json

    from fake_openai import FakeOpenAI, Reply
    from helpers import run_cli
    from test_proactiveagent_suite import agent, args, reward_model

    from proactflow.results.history.compare import with_comparisons
    from proactflow.results.history.scores import Finding, pair_frame

    quiet = {"on": False}

    def agent_that_may_stop(request: dict) -> Reply:
        reply = agent(request)
        if quiet["on"] and reply.content and "Proactive Task" in reply.content:
            body = json.loads(reply.content.strip("`").removeprefix("json\n"))
            return Reply(content=json.dumps({**body, "Proactive Task": None}))
        return reply

    store = tmp_path / "store"
    with FakeOpenAI({"agent": agent_that_may_stop, "reward": reward_model}) as fake:
        for day in (1, 2):
            quiet["on"] = day == 2
            assert run_cli("run", args(fake, store, tmp_path / f"day{day}", "--label", "pa",
                                       "--eval-revision", f"ckpt-{day}")) in (0, 1)
    nights = read_nights(ArtifactStore(store), series="pa")
    (_, before), (_, after) = (pair_frame("proactiveagent", n.pairs[0]) for n in nights)
    both = before.join(after, on=["sample", "group"], suffix="_after").filter(
        (pl.col("group") == "demo_all") & (pl.col("verdict") != pl.col("verdict_after")))
    assert both.height > 0
    changed = [{"sample": s, "before": v, "after": w}
               for s, v, w in both.select("sample", "verdict", "verdict_after").rows()]
    finding = Finding("regression", "pa", "proactiveagent", "openai/agent", "openai/reward",
                      "demo_all", -0.5, -0.6, -0.4, both.height, "night 1", "night 2", changed,
                      evaluations=(nights[0].pairs[0]["judgments"],
                                   nights[1].pairs[0]["judgments"]))
    [linked] = with_comparisons(ArtifactStore(store), tmp_path / "history", [finding])
    page = tmp_path / "history" / "compare" / "1" / "index.html"
    assert linked.links["side_by_side"] == page.resolve().as_uri()
    traces = {c["sample"].split("|")[0] for c in changed}
    assert {c["view"] for c in linked.changed} == {f"{page.resolve().as_uri()}#t={t}"
                                                   for t in traces}
    details = sorted((page.parent / "data").glob("t*.js"))
    assert len(details) == len(traces)  # only the traces that changed
    for detail in details:
        text = detail.read_text(encoding="utf-8")
        data = json.loads(text[text.index(",") + 1:text.rindex(")")])
        assert [r["evaluation"] for r in data["results"]] == [0, 1]  # both nights, in order
    index = page.read_text(encoding="utf-8")
    assert "openai/agent judged by openai/reward · before · night 1" in index
    assert "openai/agent judged by openai/reward · after · night 2" in index
    # A night that read another version of its judgments (a later --refresh wrote the one the
    # store serves now) gets no page: it would show what that night did not see.
    read = [n.pairs[0]["judgments_version"] for n in nights]
    stage = get_suite("proactiveagent").stages.judgments
    assert read == [ArtifactStore(store).get_by_key(stage, n.pairs[0]["judgments"]).version
                    for n in nights]
    from dataclasses import replace

    [unlinked] = with_comparisons(ArtifactStore(store), tmp_path / "again",
                                  [replace(finding, versions=(read[0], read[1] + 1))])
    assert "side_by_side" not in unlinked.links and "view" not in unlinked.changed[0]
    assert not (tmp_path / "again" / "compare").exists()
    # Written again where the first page is, the page nothing links any more is gone.
    with_comparisons(ArtifactStore(store), tmp_path / "history",
                     [replace(finding, versions=(read[0], read[1] + 1))])
    assert not page.parent.exists()


def test_every_suites_stored_evaluations_in_the_history_and_side_by_side(tmp_path,
                                                                          prefect_server):
    """On the stores real runs leave (viewer_stores.four_suites: ProactBench imported, the
    three others run against fakes): each evaluation recorded as a night has its suite's own
    figures, and each changed sample links to a sample the viewer of the two nights holds."""
    from viewer_stores import four_suites

    from proactflow.results.history.compare import with_comparisons
    from proactflow.results.history.scores import Finding, pair_frame, pair_scores
    from proactflow.suites import suite_names

    store = ArtifactStore(four_suites(tmp_path))
    seen = set()
    for name in suite_names():
        suite = get_suite(name)
        if suite.history_metric is None:
            continue
        for key in sorted(store.keys(suite.stages.judgments)):
            judgments = store.get_by_key(suite.stages.judgments, key).frame()
            entry = pair_entry(suite, "m", "j", None, key, "", pl.DataFrame(), judgments)
            scores = {row["group"]: row["score"] for row in pair_scores(name, entry)}
            own = suite.score(judgments)
            column, scale = {"proactbench": ("weighted_score", 1),
                             "proactiveagent": ("f1", 1), "proactivebench-mllm": ("acc", 100),
                             "proactivebench-video": ("pauc_0.5", 100)}[name]
            group = {"proactbench": "phase", "proactiveagent": "split",
                     "proactivebench-mllm": "dataset", "proactivebench-video": "part"}[name]
            expected = {row[group]: None if row[column] is None else row[column] / scale
                        for row in own.iter_rows(named=True)}
            assert scores == pytest.approx(expected), name
            _, frame = pair_frame(name, entry)
            picked = frame.filter(pl.col("verdict").is_not_null())["sample"].unique().sort()[:2]
            finding = Finding("regression", "s", name, "m", "j", "g", -1.0, -1.0, -1.0, 2,
                              "night 1", "night 2",
                              [{"sample": s, "before": "x", "after": "y"} for s in picked],
                              evaluations=(key, key))
            [linked] = with_comparisons(store, tmp_path / "compare" / name, [finding])
            page = tmp_path / "compare" / name / "compare" / "1"
            views = {c["view"].split("#t=")[1] for c in linked.changed}
            assert len(list((page / "data").glob("t*.js"))) == len(views) > 0, name
            index = (page / "index.html").read_text(encoding="utf-8")
            assert all(json.dumps(view) in index for view in views), name
            seen.add(name)
    assert seen == {"proactbench", "proactiveagent", "proactivebench-mllm",
                    "proactivebench-video"}
