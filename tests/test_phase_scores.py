"""Aggregation against a hand computation, and artifact keys / store behaviour."""

from __future__ import annotations

import polars as pl
import pytest

from proactflow.cache.artifacts import ArtifactSpec, ArtifactStore
from proactflow.run.stage_keys import StageKeys
from proactflow.suites.sources import Prompt
from proactflow.suites import get_suite
from proactflow.suites.base import DataSource, Prompts
from proactflow.schemas.arrow import arrow_schema, to_frame
from proactflow.suites.proactbench.tables import JudgmentRow, PhaseScoreRow
from proactflow.config.settings import (CorpusSource, Generation, ModelRole, RunSettings,
                                        RuntimeOptions, protocol_defaults)
from proactflow.suites.proactbench.phase_scores import score_phases


def judgment(phase: str, status: str, score: str | None = None, turn: int = 1) -> JudgmentRow:
    return JudgmentRow(unique_id_eval=f"d{turn}", turn=turn, phase=phase, sample_index=0,
                       model="m", judge="j", status=status, score=score, rationale=None,
                       evidence=None, evidence_verbatim=None, message=None, prompt_tokens=None,
                       completion_tokens=None, latency_s=None, attempts=1,
                       judge_prompt_sha256="x", request_key=None)


def test_scores_match_a_hand_computation():
    rows = [
        # EMERGENT: 2 PASS, 1 PARTIAL, 1 FAIL, 1 judge error
        *[judgment("EMERGENT", "scored", s, i) for i, s in
          enumerate(["PASS", "PASS", "PARTIAL", "FAIL"])],
        judgment("EMERGENT", "judge_error", turn=9),
        # CRITICAL: 1 PARTIAL, 1 generation error, 1 skipped, 1 unevaluable
        judgment("CRITICAL", "scored", "PARTIAL"),
        judgment("CRITICAL", "generation_error", turn=2),
        judgment("CRITICAL", "skipped", turn=3),
        judgment("CRITICAL", "unevaluable", turn=4),
        # RECOVERY: only a generation error
        judgment("RECOVERY", "generation_error"),
    ]
    scores = {r["phase"]: r for r in score_phases(to_frame(rows, JudgmentRow)).to_dicts()}
    assert list(scores) == ["EMERGENT", "CRITICAL", "RECOVERY", "OVERALL"]
    assert {row["judge_prompt_sha256"] for row in scores.values()} == {"x"}

    emergent = scores["EMERGENT"]
    assert (emergent["triggers"], emergent["evaluated"], emergent["pass"], emergent["partial"],
            emergent["fail"], emergent["not_evaluated"], emergent["judge_errors"]) == \
        (5, 4, 2, 1, 1, 1, 1)
    assert emergent["pass_rate"] == pytest.approx(2 / 4)
    assert emergent["partial_rate"] == pytest.approx(1 / 4)
    assert emergent["weighted_score"] == pytest.approx((2 + 0.5) / 4)

    critical = scores["CRITICAL"]
    assert (critical["evaluated"], critical["generation_errors"], critical["skipped"],
            critical["unevaluable"], critical["not_evaluated"]) == (1, 1, 1, 1, 3)
    assert critical["weighted_score"] == pytest.approx(0.5)

    recovery = scores["RECOVERY"]
    assert recovery["evaluated"] == 0
    assert recovery["pass_rate"] is None and recovery["weighted_score"] is None

    overall = scores["OVERALL"]
    assert (overall["triggers"], overall["evaluated"], overall["not_evaluated"]) == (10, 5, 5)
    # Pooled over triggers, not the mean of the phase scores.
    assert overall["weighted_score"] == pytest.approx((2 + 0.5 + 0.5) / 5)
    assert overall["pass_rate"] == pytest.approx(2 / 5)


def test_phase_scores_table_has_its_declared_schema():
    frame = score_phases(to_frame([judgment("EMERGENT", "scored", "PASS")], JudgmentRow))
    assert frame.to_arrow().schema.names == arrow_schema(PhaseScoreRow).names


def settings(**changes) -> RunSettings:
    def role(model, kind, **generation):
        base = protocol_defaults(kind, model).model_dump()
        return ModelRole(model=model, api_base="http://localhost:8000/v1",
                         generation=Generation(**{**base, **generation}))

    values = dict(model_under_test=role("openai/m", "model_under_test"),
                  judge=role("openai/j", "judge"), corpus=CorpusSource(path="a.jsonl"),
                  store="/tmp/a")
    values.update(changes)
    return RunSettings(**values)


PROACTBENCH = get_suite("proactbench")


def triggers_spec(s: RunSettings, revision: str):
    return StageKeys(PROACTBENCH, s).samples(DataSource(revision, "test corpus"))


def judge_prompts(sha256: str) -> Prompts:
    return Prompts({"judge": Prompt("(the judge prompt)", sha256, "test")})


def keys(s: RunSettings) -> tuple[str, str, str]:
    t = triggers_spec(s, "sha256:abc").key
    r = StageKeys(PROACTBENCH, s).responses(t, Prompts()).key
    return t, r, StageKeys(PROACTBENCH, s).judgments(r, judge_prompts("prompt-sha")).key


def test_incidental_settings_stay_out_of_keys():
    base = keys(settings())
    assert keys(settings(store="/elsewhere", out="/out", corpus=CorpusSource(path="b.jsonl"),
                         runtime=RuntimeOptions(concurrency=3, timeout_s=5, rpm=10))) == base
    keyed = settings().model_under_test.model_copy(update={"api_key_env": "OTHER_KEY"})
    assert keys(settings(model_under_test=keyed)) == base


def test_output_changing_settings_enter_keys():
    t, r, j = keys(settings())
    hotter = settings().model_under_test.model_copy(update={"generation": Generation(
        temperature=0.2, max_tokens=8192, top_p=1.0)})
    assert keys(settings(model_under_test=hotter))[0] == t
    assert keys(settings(model_under_test=hotter))[1] != r
    other_judge = settings().judge.model_copy(update={"model": "openai/j2"})
    t2, r2, j2 = keys(settings(judge=other_judge))
    assert (t2, r2) == (t, r) and j2 != j
    limited = keys(settings(corpus=CorpusSource(path="a.jsonl", limit=3)))
    assert limited[0] != t
    assert StageKeys(PROACTBENCH, settings()).judgments(r, judge_prompts("other-prompt")).key != j
    assert triggers_spec(settings(), "sha256:def").key != t


def test_store_round_trip_and_completeness(tmp_path):
    store = ArtifactStore(tmp_path)
    spec = ArtifactSpec("stage", 1, {"up": "k"}, {"a": 1})
    assert store.get(spec) is None
    frame = pl.DataFrame({"x": [1, 2]})
    store.put(spec, frame.to_arrow(), complete=False)
    found = store.get(spec)
    assert found is not None and not found.complete
    assert found.frame().equals(frame)
    assert store.key_material(found.path)["inputs"] == {"up": "k"}
    store.put(spec, frame.to_arrow())
    assert store.get(spec).complete
    leftovers = [p.name for p in found.path.parent.iterdir() if p.name != found.path.name]
    assert leftovers == []


def test_proactbench_keys_are_those_of_stores_written_before_the_suite_seam():
    """Stores written before suites existed keep serving their artifacts: the same settings give
    the same keys (these three were computed by the code before the seam)."""
    def role(model, kind):
        return ModelRole(model=model, api_base="http://localhost:8000/v1",
                         generation=protocol_defaults(kind, model))

    plain = RunSettings(model_under_test=role("openai/m", "model_under_test"),
                        judge=role("openai/j", "judge"), corpus=CorpusSource(path="a.jsonl"),
                        store="/tmp/a")
    assert keys(plain) == (
        "015fbc8fa294d5f6d7ffd92a184170a6fd0bc32c33d31f12f998e4e16dd4a06e",
        "ed132807f658c52e177275623596ad445b7bb6f9314b151bb5f203a20efdfa20",
        "a1f964887db817fc1a24afb0d6e31b2fef612fc063a54258e5b5d7a7841d74a7")
