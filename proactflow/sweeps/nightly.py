"""What makes a sweep one night of a series: the snapshot check before it, the night recorded
in the store's history after it, the regressions and improvements against the night before,
each told to Prefect as an event (`proactflow.regression` / `proactflow.improvement`) that an
automation can act on."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from ..cache.artifacts import ArtifactStore
from ..config.settings import RunSettings
from ..results.history.nights import (FOLDER, latest_snapshots, newest_nights, night_name,
                               pair_entry, series_slug, write_night)
from ..results.history.compare import with_comparisons
from ..results.history.scores import Finding, night_findings, pair_scores
from ..results.history.night_pages import keep_pages, mirror_compare, night_folder
from ..suites.base import Suite
from .snapshot import PROBE_MAX_TOKENS, PROBE_PROMPT_TOKENS, Change, Probe, changes, probe_all
from .snapshot import refreshed, roles_to_probe
from .sweep_file import SweepConfig

EVENT_PREFIX = "proactflow"


async def check_snapshots(config: SweepConfig, runs: list[RunSettings], store: ArtifactStore,
                          today: datetime) -> tuple[list[RunSettings], list[Probe],
                                                    list[Change]]:
    """Probe every model an earlier night of the series recorded (whose cached results this
    night may reuse; a model new to the series has nothing to compare with), compare, and (with
    `refresh_on_change`) ask the changed ones again."""
    latest = latest_snapshots(newest_nights(store, series=config.name, suite=config.suite),
                              roles_to_probe(runs))
    probes = await probe_all(runs, set(latest))
    found = changes(probes, latest, today.strftime("%Y-%m-%d %H:%M"))
    if found and config.refresh_on_change:
        runs = refreshed(runs, found)
    return runs, probes, found


def planned_probe_line(config: SweepConfig, runs: list[RunSettings],
                       store: ArtifactStore) -> str | None:
    """The plan's line for the snapshot check: how many fresh calls, and their cost."""
    from ..providers.llm import estimated_cost

    wanted = roles_to_probe(runs)
    latest = latest_snapshots(newest_nights(store, series=config.name, suite=config.suite),
                              wanted)
    probed = [key for key in wanted if key in latest]
    if not probed:
        return None
    costs = [estimated_cost(model, PROBE_PROMPT_TOKENS, PROBE_MAX_TOKENS) for _, model in probed]
    cost = "unknown" if None in costs else f"${sum(c or 0.0 for c in costs):.4f}"
    return (f"snapshot check: {len(probed)} fresh calls, one per model the series '"
            f"{config.name}' has seen, never from the cache (at most {PROBE_PROMPT_TOKENS} "
            f"prompt + {PROBE_MAX_TOKENS} completion tokens each; estimated cost {cost})")


def probe_cost_lines(probes: list[Probe]) -> list[str]:
    """The snapshot check's line of the summary's costs (none when nothing was probed)."""
    if not probes:
        return []
    failed = [p for p in probes if p.error]
    return [f"- snapshot check: {len(probes)} fresh calls (at most {PROBE_PROMPT_TOKENS} prompt "
            f"+ {PROBE_MAX_TOKENS} completion tokens each)"
            + (f"; failed for {', '.join(p.model + ': ' + str(p.error) for p in failed)}"
               if failed else "")]


def record_night(config: SweepConfig, suite: Suite, store: ArtifactStore, night: datetime,
                 run_id: str, finished: list[tuple[RunSettings, dict[str, Any]]],
                 found: list[Change], out: Path | None
                 ) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Write the sweep's night to its series; returns its pairs and its findings against the
    night before."""
    return record_pairs(store, suite, config.name, night, run_id, finished, found, out,
                        config.regression_threshold)


def record_pairs(store: ArtifactStore, suite: Suite, series: str, night: datetime,
                 run_id: str, finished: list[tuple[RunSettings, dict[str, Any]]],
                 found: list[Change], out: Path | None, threshold: float = 0.0
                 ) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Write a night of `series` (a sweep's, or a labelled run's) from what its evaluations
    returned; returns its pairs and its findings against the night before."""
    stages = suite.stages
    notes = {(c.role, c.model): c.line() for c in found}
    pairs = []
    for settings, outcome in finished:
        keys = {stage["stage"]: stage["key"] for stage in outcome["stages"]}
        answered = store.get_by_key(stages.responses, keys[stages.responses])
        responses = answered.frame()
        judged = store.get_by_key(stages.judgments, keys[stages.judgments])
        judgments = judged.frame()
        model, judge = settings.model_under_test.model, settings.judge_name
        entry = pair_entry(
            suite, model, judge, settings.model_under_test.revision,
            keys[stages.judgments], keys[stages.responses], responses, judgments,
            [line for (role, name), line in notes.items()
             if (role, name) in (("model", model), ("judge", judge))])
        # Each figure and its interval once, now: `proactflow history` reads them.
        # The versions read: a later --refresh writes others beside them under the same key,
        # and this night's side-by-side pages read these (cache/pinned.py).
        pairs.append({**entry, "judgments_version": judged.version,
                      "responses_version": answered.version,
                      "scores": pair_scores(suite.name, entry)})
    name = night_name(night, run_id)
    links: dict[str, str | None] = {"report": None, "viewer": None}
    if out is not None:
        # A sweep's report page; a labelled run writes none: its suite's main export instead.
        # Each kept in the night's own folder, which the next night does not write.
        kept = keep_pages(out, name, ["report.html", suite.main_output, "viewer"])
        report = kept.get("report.html") or kept.get(suite.main_output)
        links["report"] = report.resolve().as_uri() if report is not None else None
        viewer = kept["viewer"] / "index.html" if "viewer" in kept else None
        links["viewer"] = viewer.resolve().as_uri() if viewer is not None and viewer.exists() \
            else None
    write_night(store, series, suite.name, night, run_id, pairs, links,
                {"regression_threshold": threshold, "changes": [c.line() for c in found]})
    findings = night_findings(newest_nights(store, series=series, suite=suite.name), run_id,
                              threshold, store.json_names(f"{FOLDER}/{series_slug(series)}"))
    if out is None:
        return pairs, findings
    findings = with_comparisons(store, night_folder(out, name), findings)
    mirror_compare(out, name)
    return pairs, findings


def emit_findings(findings: list[Finding], *, flush: bool = False) -> None:
    """A Prefect event per finding, related to the sweep's flow run (Prefect adds it). With
    `flush` (outside a flow run: a labelled run's, after its flow ended), they are sent before
    this returns, since no flow run's end sends them."""
    from prefect.events import emit_event
    from prefect.events.worker import EventsWorker

    for f in findings:
        emit_event(
            event=f"{EVENT_PREFIX}.{f.kind}",
            resource={"prefect.resource.id": f"{EVENT_PREFIX}.model.{f.model}",
                      "prefect.resource.name": f.model,
                      "proactflow.judge": f.judge, "proactflow.suite": f.suite,
                      "proactflow.group": f.group, "proactflow.series": f.series},
            payload={"model": f.model, "judge": f.judge, "suite": f.suite, "group": f.group,
                     "series": f.series, "metric": f.metric, "variant": f.variant,
                     "delta": f.delta, "interval": [f.ci_low, f.ci_high],
                     "samples": f.samples, "before": f.before, "after": f.after,
                     "changed": f.changed[:50]})
    if flush and findings:
        EventsWorker.instance().drain()  # the worker emit_event used: sent, then stopped


def summary_lines(findings: list[Finding], found: list[Change]) -> list[str]:
    """The top of the sweep's summary: what changed, whether it is real."""
    lines: list[str] = []
    if findings:
        lines += ["## Regressions and improvements", ""]
        for f in findings:
            lines.append(f"- **{f.line()}**")
            lines += [f"  - {c['sample']}: {c['before']} -> {c['after']}"
                      + (f" ([side by side]({c['view']}))" if c.get("view") else "")
                      for c in f.changed]
            if f.links.get("before_viewer") or f.links.get("after_viewer"):
                lines.append(f"  - viewer: [before]({f.links.get('before_viewer')}) | "
                             f"[after]({f.links.get('after_viewer')})")
        lines.append("")
    if found:
        lines += ["## Models that changed behind their name", ""]
        lines += [f"- {c.line()}" for c in found]
        lines.append("")
    return lines


def score_rows(suite: Suite, night: datetime, pairs: list[dict[str, Any]]
               ) -> list[dict[str, Any]]:
    """The night's scores as the rows of the sweep's table artifact."""
    return [{"night": night.isoformat(), "model": p["model"], "judge": p["judge"], **s}
            for p in pairs for s in pair_scores(suite.name, p)]
