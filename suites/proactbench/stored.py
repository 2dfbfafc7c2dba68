"""ProactBench's results already in a store: the published per-dialogue results files (the
published models' `*_results.jsonl`) imported as responses and judgments artifacts, so they can
be reported, compared or re-judged without paying for generation; and stored responses narrowed
to fewer triggers for `rejudge --all-models`.

Published files are not uniform: `unique_id_eval` is sometimes an integer and `evaluated_model`
sometimes a placeholder, so rows are matched to the corpus on `unique_id_eval` where it is one of
the corpus's ids and on (`blueprint_id`, `style_combination_index`, `uuid`) otherwise. A corpus
trigger missing from the file (upstream dropped failed generations silently) becomes a
`generation_error` row, so the report can say how many triggers each file really scored.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from ...cache.artifacts import ArtifactSpec, ArtifactStore
from ...common.errors import UserError
from ...config.settings import CorpusSource, ModelRole, RunSettings, protocol_defaults
from ...schemas.arrow import conform, to_frame
from ..stored_results import ImportTools, NarrowedResponses
from . import judgments, responses, triggers
from .corpus import PHASES
from .tables import JudgmentRow, ResponseRow, TriggerRow

if TYPE_CHECKING:
    from ..base import Suite

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


def import_results(suite: "Suite", path: Path, corpus_path: str, store: ArtifactStore,
                   tools: ImportTools, *, judge: str, model: str | None = None) -> ImportReport:
    """Store one results file as responses + judgments (+ phase_scores) artifacts."""
    rows = _read_results(path)
    name = model or model_name(rows, path)
    settings = RunSettings(
        model_under_test=ModelRole(model=name,
                                   generation=protocol_defaults("model_under_test", name)),
        judge=ModelRole(model=judge, generation=protocol_defaults("judge", judge)),
        corpus=CorpusSource(path=corpus_path), store=store.url)
    triggers_artifact = tools.samples(suite, settings)
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
    scores_artifact = tools.scores(suite, judgment_artifact)
    tools.record(path, digest, name, judge, {
        "triggers": triggers_artifact.key, "responses": responses_spec.key,
        "judgments": judgments_spec.key, "phase_scores": scores_artifact.key},
        triggers_artifact.material().get("settings", {}).get("corpus_revision"))
    statuses = Counter(r.status for r in judgment_rows)
    return ImportReport(str(path), name, judge, len(judgment_rows), statuses["scored"],
                        statuses["skipped"], statuses["generation_error"],
                        responses_spec.key, judgments_spec.key, unmatched)


def _judgment(base: dict[str, Any], judge: str, **fields: Any) -> JudgmentRow:
    values = dict(base, judge=judge, score=None, rationale=None, evidence=None,
                  evidence_verbatim=None, message=None, prompt_tokens=None,
                  completion_tokens=None, latency_s=None, attempts=0,
                  judge_prompt_sha256=UNKNOWN_PROMPT, request_key=None)
    values.update(fields)
    return JudgmentRow(**values)





def import_published(suite: "Suite", source: str, store: ArtifactStore, tools: ImportTools, *,
                     corpus: str | None, judge: str, model: str | None) -> list[str]:
    """`import FILE`: one results file stored; the line the command prints about it."""
    if not corpus:
        raise UserError("import needs --corpus: the final_dialogues.jsonl the results were "
                        "produced on")
    done = import_results(suite, Path(source), corpus, store, tools, judge=judge, model=model)
    return [f"{source}: {done.model} judged by {done.judge}: {done.scored} of "
            f"{done.corpus_triggers} corpus triggers scored, {done.skipped} skipped, "
            f"{done.missing} missing from the file"
            + (f"; {done.unmatched} rows of the file match no dialogue of the corpus"
               if done.unmatched else "")]


def narrowed(store: ArtifactStore, evaluation: Any, limit: int | None,
             phases: tuple[str, ...]) -> NarrowedResponses | None:
    """An evaluation's responses (results/evaluations.py's Evaluation), restricted to the
    first `limit` dialogues and `phases`, as the artifacts a run with those options would have
    stored; None when they are that already."""
    trigger_set = evaluation.trigger_set
    assert trigger_set is not None
    responses_material = store.material("responses", evaluation.responses_key)
    new_limit = min(x for x in (limit, trigger_set.limit) if x) if (limit or trigger_set.limit) \
        else None
    new_phases = tuple(p for p in PHASES if p in phases and p in trigger_set.phases)
    if new_limit == trigger_set.limit and set(new_phases) == set(trigger_set.phases):
        return None
    triggers_key = responses_material["inputs"]["triggers"]
    selection = dict(store.material("triggers", triggers_key)["settings"])
    selection.update(limit=new_limit, phases=sorted(new_phases))
    kept = evaluation.triggers.filter(
        pl.col("phase").is_in(list(new_phases))
        & (pl.col("dialogue_index") < (new_limit or 10**9)))
    triggers_spec = ArtifactSpec(triggers.STAGE, triggers.VERSION, {}, selection)
    if store.get(triggers_spec) is None:
        store.put(triggers_spec, conform(kept, TriggerRow))
    chosen = evaluation.responses.join(kept.select("unique_id_eval", "turn"),
                                       on=["unique_id_eval", "turn"], how="semi")
    responses_spec = ArtifactSpec(responses.STAGE, responses.VERSION,
                                  {"triggers": triggers_spec.key},
                                  responses_material["settings"])
    if store.get(responses_spec) is None:
        store.put(responses_spec, conform(chosen, ResponseRow))
    return NarrowedResponses(triggers_spec.key, responses_spec.key, new_limit, new_phases,
                             kept.height, chosen.height)
