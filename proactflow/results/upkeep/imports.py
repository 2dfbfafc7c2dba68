"""Import upstream per-dialogue results files (the published models' `*_results.jsonl`) into the
store as responses and judgments artifacts, so they can be reported, compared or re-judged
without paying for generation.

Published files are not uniform: `unique_id_eval` is sometimes an integer and `evaluated_model`
sometimes a placeholder, so rows are matched to the corpus on `unique_id_eval` where it is one of
the corpus's ids and on (`blueprint_id`, `style_combination_index`, `uuid`) otherwise. A corpus
trigger missing from the file (upstream dropped failed generations silently) becomes a
`generation_error` row, so the report can say how many triggers each file really scored.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...cache.artifacts import ArtifactSpec, ArtifactStore
from ...common.errors import UserError
from ...run.pipeline import materialize_samples, materialize_scores, suite_of
from ...run.run_records import record_name
from ...schemas.arrow import conform, to_frame
from ...suites.proactbench.tables import JudgmentRow, ResponseRow
from ...config.settings import PAPER_JUDGE, CorpusSource, ModelRole, RunSettings, protocol_defaults
from ...suites.proactbench import judgments, responses

UNKNOWN_PROMPT = "unknown"
"""The judge prompt of published labels: not established by the files, so not claimed."""
_PLACEHOLDER_MODELS = {"", "local_model", "model", "unknown"}
_FILE_SUFFIXES = ("_proactivity_bench_results", "_results")


@dataclass(frozen=True)
class ImportReport:
    """What one imported file held."""

    path: str
    model: str
    judge: str
    corpus_triggers: int
    scored: int
    skipped: int
    missing: int
    responses_key: str
    judgments_key: str
    unmatched: int = 0
    """Rows of the file that match no dialogue of the corpus."""


def model_name(rows: list[dict[str, Any]], path: Path) -> str:
    """The model a results file is about: its most common real `evaluated_model`, else the file
    name without upstream's suffixes."""
    named = Counter(str(r.get("evaluated_model") or "") for r in rows)
    for name, _ in named.most_common():
        if name.strip().lower() not in _PLACEHOLDER_MODELS:
            return name
    stem = path.stem
    for suffix in _FILE_SUFFIXES:
        stem = stem.removesuffix(suffix)
    return stem


def _read_results(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"results file not found: {path}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not valid UTF-8") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("trigger_points"), list):
            raise UserError(f"{path}:{number}: not an upstream results row (no trigger_points)")
        rows.append(row)
    if not rows:
        raise UserError(f"{path}: no rows")
    return rows


def _check_against_corpus(path: Path, number: int, uid: str, row: dict[str, Any],
                          corpus: dict[int, str]) -> None:
    """A matched dialogue's trigger turns must be the corpus's (some may be missing: upstream
    dropped failed generations) with the same rubric types: a file made on another corpus, or
    another version of it, would otherwise be scored against the wrong rubrics."""
    points = {point.get("turn"): (point.get("evaluation_rubric") or {}).get("type")
              for point in row["trigger_points"]}
    extra = sorted(set(points) - set(corpus), key=str)
    if extra:
        raise UserError(f"{path}:{number}: dialogue {uid} has a trigger at turn {extra[0]}, the "
                        f"corpus only at {sorted(corpus)}: was this file made on another "
                        "corpus?")
    differing = [turn for turn, phase in points.items() if corpus[turn] != phase]
    if differing:
        turn = differing[0]
        raise UserError(f"{path}:{number}: dialogue {uid} turn {turn} is {points[turn]} in the "
                        f"file, {corpus[turn]} in the corpus: was this file made on another "
                        "corpus?")


def _match_key(row: dict[str, Any]) -> tuple[str, int, str]:
    return (str(row.get("blueprint_id")), int(row.get("style_combination_index") or 0),
            str(row.get("uuid")))


def import_results(path: Path, corpus_path: str, store: ArtifactStore, *,
                   judge: str = PAPER_JUDGE, model: str | None = None) -> ImportReport:
    """Store one results file as responses + judgments (+ phase_scores) artifacts."""
    rows = _read_results(path)
    name = model or model_name(rows, path)
    settings = RunSettings(
        model_under_test=ModelRole(model=name,
                                   generation=protocol_defaults("model_under_test", name)),
        judge=ModelRole(model=judge, generation=protocol_defaults("judge", judge)),
        corpus=CorpusSource(path=corpus_path), store=store.url)
    suite = suite_of(settings)
    triggers_artifact, _ = materialize_samples(suite, settings, store)
    trigger_frame = triggers_artifact.frame()

    corpus_ids = set(trigger_frame["unique_id_eval"].unique().to_list())
    by_match = {(b, s, u): uid for uid, b, s, u in trigger_frame.select(
        "unique_id_eval", "blueprint_id", "style_combination_index", "uuid").unique().rows()}
    corpus_points: dict[str, dict[int, str]] = {}
    for uid, turn, phase in trigger_frame.select("unique_id_eval", "turn", "phase").rows():
        corpus_points.setdefault(uid, {})[turn] = phase
    published: dict[tuple[str, int], tuple[str | None, dict[str, Any]]] = {}
    unmatched = 0
    for number, row in enumerate(rows, start=1):
        uid = row.get("unique_id_eval")
        uid = uid if isinstance(uid, str) and uid in corpus_ids else by_match.get(_match_key(row))
        if uid is None:
            unmatched += 1  # a dialogue this corpus does not have: counted, reported
            continue
        _check_against_corpus(path, number, uid, row, corpus_points[uid])
        responses_by_turn = {t.get("turn"): t.get("assistant_response")
                             for t in row.get("turn_records") or []}
        for point in row["trigger_points"]:
            published[(uid, point.get("turn"))] = (responses_by_turn.get(point.get("turn")),
                                                   point.get("evaluation_result") or {})

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    response_rows, judgment_rows = [], []
    for trigger in trigger_frame.iter_rows(named=True):
        key = (trigger["unique_id_eval"], trigger["turn"])
        base = dict(unique_id_eval=key[0], turn=key[1], phase=trigger["phase"], sample_index=0,
                    model=name)
        text, result = published.get(key, (None, None))
        if not trigger["evaluable"] and text is None:  # nothing to answer: as in a run
            response_rows.append(ResponseRow(**base, status="unevaluable",
                                             message=trigger["unevaluable_reason"],
                                             response=None, finish_reason=None,
                                             prompt_tokens=None, completion_tokens=None,
                                             latency_s=None, attempts=0, request_key=None))
            judgment_rows.append(_judgment(base, judge, status="unevaluable",
                                           message=trigger["unevaluable_reason"]))
            continue
        if result is None or text is None:
            message = "not in the imported results file (upstream dropped it)"
            response_rows.append(ResponseRow(**base, status="error", message=message,
                                             response=None, finish_reason=None,
                                             prompt_tokens=None, completion_tokens=None,
                                             latency_s=None, attempts=0, request_key=None))
            judgment_rows.append(_judgment(base, judge, status="generation_error",
                                           message=message))
            continue
        response_rows.append(ResponseRow(**base, status="ok", message=None, response=text,
                                         finish_reason=None, prompt_tokens=None,
                                         completion_tokens=None, latency_s=None, attempts=0,
                                         request_key=None))
        score = result.get("score")
        if result.get("status") == "EVALUATED" and score in ("PASS", "PARTIAL", "FAIL"):
            judgment_rows.append(_judgment(
                base, judge, status="scored", score=score, rationale=result.get("rationale"),
                evidence=result.get("evidence"),
                evidence_verbatim=judgments.evidence_is_verbatim(result.get("evidence") or "",
                                                                 text)))
        elif result.get("status") == "SKIPPED":
            judgment_rows.append(_judgment(base, judge, status="skipped",
                                           message="the judge answered SKIPPED",
                                           rationale=result.get("rationale")))
        else:
            judgment_rows.append(_judgment(base, judge, status="judge_error",
                                           message=f"unusable published label {result!r}"[:300]))

    provenance = {"imported_file_sha256": digest, "model": name}
    responses_spec = ArtifactSpec(responses.STAGE, responses.VERSION,
                                  {"triggers": triggers_artifact.key}, provenance)
    response_frame = to_frame(response_rows, ResponseRow)
    # Imported artifacts are final: nothing would ever fill the gaps of a published file.
    store.put(responses_spec, conform(response_frame, ResponseRow))
    # Which judge prompt produced the published labels is not established: say so.
    judgments_spec = ArtifactSpec(judgments.STAGE, judgments.VERSION,
                                  {"responses": responses_spec.key},
                                  {**provenance, "judge": judge,
                                   "judge_prompt_sha256": UNKNOWN_PROMPT})
    judgment_artifact = store.put(judgments_spec,
                                  conform(to_frame(judgment_rows, JudgmentRow), JudgmentRow))
    scores_artifact, _ = materialize_scores(suite, store, judgment_artifact)
    _write_import_record(store, path, digest, name, judge, {
        "triggers": triggers_artifact.key, "responses": responses_spec.key,
        "judgments": judgments_spec.key, "phase_scores": scores_artifact.key},
        triggers_artifact.material().get("settings", {}).get("corpus_revision"))
    statuses = Counter(r.status for r in judgment_rows)
    return ImportReport(str(path), name, judge, len(judgment_rows), statuses["scored"],
                        statuses["skipped"], statuses["generation_error"],
                        responses_spec.key, judgments_spec.key, unmatched)


def _write_import_record(store: ArtifactStore, path: Path, digest: str, model: str, judge: str,
                         artifacts: dict[str, str], corpus_revision: str | None) -> None:
    """A run record for the import, so `runs ls` lists it and `gc` keeps what it stored."""
    started = datetime.now(timezone.utc)
    run_id = uuid.uuid4().hex
    store.write_json(record_name(started, run_id), {
        "run_id": run_id, "flow": "import", "started": started.isoformat(),
        "finished": started.isoformat(), "complete": True,
        "imported_file": str(path), "imported_file_sha256": digest,
        "model_under_test": {"model": model}, "judge": {"model": judge},
        "judge_prompt_sha256": UNKNOWN_PROMPT, "corpus_revision": corpus_revision,
        "artifacts": artifacts})


def _judgment(base: dict[str, Any], judge: str, **fields: Any) -> JudgmentRow:
    values = dict(base, judge=judge, score=None, rationale=None, evidence=None,
                  evidence_verbatim=None, message=None, prompt_tokens=None,
                  completion_tokens=None, latency_s=None, attempts=0,
                  judge_prompt_sha256=UNKNOWN_PROMPT, request_key=None)
    values.update(fields)
    return JudgmentRow(**values)



def import_published_traces(folder: Path, store: ArtifactStore, *, corpus: str | None = None,
                            model: str | None = None) -> Any:
    """`import --suite proactiveagent DIR`: one model's published ProactiveBench traces stored as
    its responses (results/upkeep/published_traces.py), with a run record naming them."""
    from .published_traces import PUBLISHED_REVISION, import_traces

    done = import_traces(folder, store, corpus=corpus, model=model)
    digest = hashlib.sha256()
    for path in sorted(Path(folder).expanduser().glob("*.json")):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    responses = store.material("proactiveagent_responses", done.responses_key)
    samples_key = responses["inputs"]["proactiveagent_events"]
    _write_import_record(store, Path(folder), digest.hexdigest(),
                         f"{done.model}@{PUBLISHED_REVISION}", "-",
                         {"proactiveagent_events": samples_key,
                          "proactiveagent_responses": done.responses_key},
                         store.material("proactiveagent_events", samples_key)
                         .get("settings", {}).get("corpus_revision"))
    return done
