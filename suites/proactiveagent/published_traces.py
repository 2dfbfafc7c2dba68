"""Upstream's published per-model predictions (`eval/traces.zip`: `traces_new/<model>/<trace>.json`)
stored as the responses of that model, so `rejudge` can score them with any judge.

A published trace is a test trace whose events carry the model's `agent_response` (its
proposals) and `other_infomation` (the rest of its reply); there are no verdicts. The traces
were made on an earlier version of the test files: some events have other text, some current
events are new. Each test trace is aligned with its published version on the events' timestamps
(difflib's longest matching blocks; a run of differing timestamps of equal length is paired in
order), so an inserted event shifts nothing. An event whose text differs keeps its published
prediction and is listed; an event the published trace lacks is a `not_imported` row, never a
failed event; a published trace that is not a test trace is listed. Nothing is dropped silently.

The responses are stored under the key a run of that model would have (revision label
`published-traces`, upstream's agent prompts), so `rejudge --suite proactiveagent --eval-model
MODEL --eval-revision published-traces` finds them.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...cache.artifacts import ArtifactStore
from ...common.errors import UserError
from ...config.generation import protocol_defaults
from ...config.settings import CorpusSource, ModelRole, RunSettings
from ...schemas.arrow import conform, to_frame
from ..declarations import Prompts
from ..sources import Prompt
from ..stored_results import ImportTools
from . import upstream
from .rules import AGENT_INSTRUCTION, AGENT_SYSTEM, proposal_text
from .tables import AgentResponseRow, AgentStatus

if TYPE_CHECKING:
    from ..base import Suite

PUBLISHED_REVISION = "published-traces"
"""The revision label of imported predictions: a run of the same model never reuses them."""
FAILED_UPSTREAM = ("every attempt failed upstream: the published trace keeps the test file's "
                   "agent_response object")


@dataclass
class TracesImport:
    """What one imported folder held, and what of it did not match the test data."""

    folder: str
    model: str
    events: int
    """Events of the test data (every one has a responses row)."""
    imported: int
    """Events with a published prediction (proposals, nulls and failed events)."""
    failed_events: int
    """Of those, events whose every attempt failed upstream (judged as "candidate_task")."""
    responses_key: str
    changed: list[str] = field(default_factory=list)
    """trace:event of imported events whose published text differs from the test data's."""
    not_imported: list[str] = field(default_factory=list)
    """trace:event of test events the published traces lack (new since, or a trace missing)."""
    extra_traces: list[str] = field(default_factory=list)
    """Published traces that are not test traces (not imported)."""
    missing_traces: list[str] = field(default_factory=list)
    """Test traces with no published file."""


def _read_trace(path: Path) -> list[dict[str, Any]]:
    try:
        events = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: not a readable JSON trace ({exc})") from None
    if not isinstance(events, list) or not all(
            isinstance(e, dict) and isinstance(e.get("observation"), dict) for e in events):
        raise UserError(f"{path}: not a published trace (a list of events with an observation)")
    return events


def align(test_times: list[str], published_times: list[str]) -> dict[int, int]:
    """Test event index -> published event index, paired on timestamps."""
    pairs: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, published_times, test_times, autojunk=False)
    for tag, p1, p2, t1, t2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and p2 - p1 == t2 - t1):
            pairs.update({t1 + k: p1 + k for k in range(t2 - t1)})
    return pairs


def _prediction(event: dict[str, Any], where: str) -> tuple[AgentStatus, Any]:
    """(status, proposal) of a published event, as upstream's scripts read its agent_response."""
    predictions = event.get("agent_response")
    if isinstance(predictions, dict):  # the test file's object: every attempt failed
        return "error", None
    if predictions is None or predictions == []:
        return "ok", None
    if not isinstance(predictions, list) or len(predictions) != 1:
        raise UserError(f"{where}: agent_response is {json.dumps(predictions)[:80]}, not a list "
                        "of at most one proposal")
    return "ok", predictions[0]


def import_traces(suite: "Suite", folder: Path, store: ArtifactStore, tools: ImportTools, *,
                  corpus: str | None = None, model: str | None = None) -> TracesImport:
    """Store one model's published traces as its responses to the test data."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder of published traces (traces_new/<model>/)")
    published = {path.stem: path for path in sorted(folder.glob("*.json"))}
    if not published:
        raise UserError(f"{folder}: no traces (<trace>.json) there")
    name = model or folder.name
    role = ModelRole(model=name, revision=PUBLISHED_REVISION,
                     generation=protocol_defaults("model_under_test", name, "proactiveagent"))
    settings = RunSettings(suite="proactiveagent", model_under_test=role, judge=None,
                           corpus=CorpusSource(path=corpus), store=store.url)
    samples_artifact = tools.samples(suite, settings)
    samples = samples_artifact.frame()
    test_traces = sorted(set(samples["trace"].to_list()))
    done = TracesImport(str(folder), name, samples.height, 0, 0, "",
                        extra_traces=sorted(set(published) - set(test_traces)),
                        missing_traces=sorted(set(test_traces) - set(published)))
    rows = []
    for trace in test_traces:
        events = samples.filter(samples["trace"] == trace).sort("event_index").to_dicts()
        trace_events = _read_trace(published[trace]) if trace in published else []
        pairs = align([e["time"] for e in events],
                      [str(e["observation"].get("time")) for e in trace_events])
        for event in events:
            base = dict(trace=trace, event_index=event["event_index"], sample_index=0, model=name,
                        history_text=None, finish_reason=None, prompt_tokens=None,
                        completion_tokens=None, latency_s=None, attempts=0, request_key=None)
            where = f"{trace}:{event['event_index']}"
            if event["event_index"] not in pairs:
                done.not_imported.append(where)
                rows.append(AgentResponseRow(
                    **base, status="not_imported", response=None, proposed_task=None,
                    message="not in the published trace (the event is newer than it)"
                    if trace in published else "no published trace of this test trace"))
                continue
            found = trace_events[pairs[event["event_index"]]]
            status, task = _prediction(found, f"{published[trace]}: event "
                                              f"{pairs[event['event_index']]}")
            observation = found["observation"]
            changed = (observation.get("time"), observation.get("event")) != \
                (event["time"], event["event"])
            if changed:
                done.changed.append(where)
            done.imported += 1
            done.failed_events += status == "error"
            note = "published text differs: " + json.dumps(observation.get("event"),
                                                          ensure_ascii=False)[:200]
            rows.append(AgentResponseRow(
                **base, status=status,
                message="; ".join(m for m in (FAILED_UPSTREAM if status == "error" else "",
                                              note if changed else "") if m) or None,
                response=json.dumps({"agent_response": found.get("agent_response"),
                                     "other_infomation": found.get("other_infomation")},
                                    ensure_ascii=False),
                proposed_task=proposal_text(task),
                proposal_json=None if task is None else json.dumps(task, ensure_ascii=False),
                # Upstream's judge saw this trace file's own history, not the test data's.
                judge_observations_json=json.dumps(
                    [e["observation"] for e in trace_events[:pairs[event["event_index"]] + 1]],
                    ensure_ascii=False)))
    # Upstream's agent prompts made the traces: their pinned hashes key them, as in a run.
    prompts = Prompts({AGENT_SYSTEM: Prompt("", upstream.PROMPT_SHA256["agent_system"],
                                            "published traces"),
                       AGENT_INSTRUCTION: Prompt("", upstream.PROMPT_SHA256["step_instruction"],
                                                 "published traces")})
    spec = tools.responses_spec(suite, settings, samples_artifact.key, prompts)
    frame = to_frame(rows, AgentResponseRow).sort("trace", "event_index", "sample_index")
    store.put(spec, conform(frame, AgentResponseRow))
    done.responses_key = spec.key
    return done


_SHOWN = 12


def _listed(names: list[str]) -> str:
    more = f", and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def import_published(suite: "Suite", source: str, store: ArtifactStore, tools: ImportTools, *,
                     corpus: str | None, judge: str, model: str | None) -> list[str]:
    """`import --suite proactiveagent DIR`: one model's published traces stored as its
    responses (they hold no verdicts: `judge` is not theirs), with a run record naming them;
    what the command prints: the counts, and every trace and event that does not match the
    test data, by name."""
    folder = Path(source)
    done = import_traces(suite, folder, store, tools, corpus=corpus, model=model)
    digest = hashlib.sha256()
    for path in sorted(Path(folder).expanduser().glob("*.json")):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    responses = store.material(suite.stages.responses, done.responses_key)
    samples_key = responses["inputs"][suite.stages.samples]
    tools.record(Path(folder), digest.hexdigest(), f"{done.model}@{PUBLISHED_REVISION}", "-",
                 {suite.stages.samples: samples_key, suite.stages.responses: done.responses_key},
                 store.material(suite.stages.samples, samples_key)
                 .get("settings", {}).get("corpus_revision"))
    lines = [f"{done.folder}: {done.model} (revision {PUBLISHED_REVISION}): {done.imported} of "
             f"{done.events} test events imported ({done.failed_events} failed upstream, judged "
             f"as upstream judges them), responses {done.responses_key[:10]}"]
    for label, names in (("events whose published text differs (imported)", done.changed),
                         ("events not in the published traces (not_imported rows)",
                          done.not_imported),
                         ("test traces without a published file", done.missing_traces),
                         ("published traces not in the test data (not imported)",
                          done.extra_traces)):
        if names:
            lines.append(f"  {len(names)} {label}: {_listed(names)}")
    lines.append(f"  judge them: proactflow rejudge --suite proactiveagent --eval-model "
                 f"{done.model} --eval-revision {PUBLISHED_REVISION} --judge-model JUDGE ...")
    return lines
