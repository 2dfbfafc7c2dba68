"""Prefect flow `sweep`: evaluate many models (each an `evaluate` subflow, all at once, here or
as runs of a deployment on workers), then build the suite's leaderboard of those that finished.
A model that fails does not stop the others; the summary says which failed and why."""

from __future__ import annotations

# A deployment's worker starts its process by importing this module: its set-up first, before
# the imports of Prefect and litellm below (common/process.py).
from proactflow.common.process import tune_process

tune_process()

import asyncio
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import (acreate_link_artifact, acreate_markdown_artifact,
                               acreate_table_artifact)

from proactflow.cache.artifacts import ArtifactStore, write_atomic
from proactflow.config.settings import RunSettings
from proactflow.prefect_server.interrupted import note_flow_run
from proactflow.flows.evaluate import evaluate
from proactflow.providers.litellm_setup import set_up_litellm
from proactflow.run.pipeline import suite_of
from proactflow.results.history.nights import night_name, now, series_slug
from proactflow.results.history.page import add_to_report, findings_section
from proactflow.results.history.scores import Finding
from proactflow.results.history.night_pages import night_folder
from proactflow.results.report.sweeps import sweep_report
from proactflow.run.progress import coverage_problem, located_causes
from proactflow.suites import found_by_other_processes
from proactflow.sweeps.deployed import run_evaluations
from proactflow.sweeps.nightly import (check_snapshots, emit_findings, probe_cost_lines,
                                       record_night, score_rows, summary_lines)
from proactflow.sweeps.process_groups import process_count, run_in_processes
from proactflow.sweeps.sweep_file import SweepConfig

BOOTSTRAP_SEED = 0


def _cost_lines(usage: list[dict[str, Any]]) -> list[str]:
    """Tokens and cost per role over the sweep, as billed (prompt tokens the provider's cache
    read at its price; "unknown" once any price is), with the list price of what the sweep
    paid beside it when the cache served any."""
    def total(rows: list[dict[str, Any]], field: str, default: Any = 0.0) -> str:
        values = [r.get(field, default) for r in rows]
        return "unknown" if "unknown" in values else f"${sum(values):.2f}"

    lines = []
    for role in ("model_under_test", "judge"):
        rows = [u[role] for u in usage if role in u]  # no judge for a deterministic check
        if not rows:
            continue
        prompt = sum(r["prompt_tokens"] for r in rows)
        completion = sum(r["completion_tokens"] for r in rows)
        cached = sum(r.get("cache_read_tokens", 0) for r in rows)  # records before: none
        paid_cached = sum(r.get("paid_cache_read_tokens", 0) for r in rows)
        # A record before the list price was kept: its paid cost, which was the list price.
        listed = [{"paid_list_cost_usd": r.get("paid_list_cost_usd", r.get("paid_cost_usd", 0.0))}
                  for r in rows]
        lines.append(f"- {role.replace('_', ' ')}: {prompt} prompt"
                     f"{f' ({cached} cached)' if cached else ''} + {completion} completion "
                     f"tokens, estimated cost {total(rows, 'estimated_cost_usd')}; paid this "
                     f"sweep {total(rows, 'paid_cost_usd')}"
                     + (f" ({paid_cached} prompt tokens cached; list price "
                        f"{total(listed, 'paid_list_cost_usd')})" if paid_cached else ""))
    return lines


def _markdown(title: str, headline: tuple[list[str], list[list[str]]],
              failures: list[dict[str, str]], costs: list[str],
              top: list[str] | None = None) -> str:
    columns, rows = headline
    lines = [f"# {title} sweep", "", *(top or [])]
    if columns:
        lines += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    if costs:
        lines += ["", "## Tokens and cost", "", *costs]
    if failures:
        lines += ["", "## Failed", ""]
        lines += [f"- **{f['model']}** judged by {f['judge']}: {f['error']}" for f in failures]
    return "\n".join(lines) + "\n"


def process_count_of(config: SweepConfig, runs: list[RunSettings]) -> int:
    """How many processes run the pairs; 1 for a suite only this process knows (registered in
    it), which a child process could not find."""
    if not found_by_other_processes(config.suite):
        return 1
    return process_count(config.processes, len(runs))


@flow(name="sweep", persist_result=False)
async def sweep(config: SweepConfig) -> dict[str, Any]:
    """Evaluate every (model, judge) of the sweep concurrently, then rank them."""
    from prefect.runtime import flow_run

    set_up_litellm()  # its snapshot probes are calls

    logger = get_run_logger()
    note_flow_run(flow_run.id)  # its runs, and those under it, end final after a Ctrl-C
    night, run_id = now(), str(flow_run.id or "local")
    runs = config.runs()
    store = ArtifactStore(runs[0].store)
    runs, probes, changed = await check_snapshots(config, runs, store, night)
    for change in changed:
        logger.warning("%s%s", change.line(), "; asking it again (refresh_on_change)"
                       if config.refresh_on_change else "")
    outcomes: list[Any]
    if config.deployment:  # on the pool's workers, wherever they are
        outcomes = await run_evaluations(config.deployment, runs, config.work_queues(),
                                         config.deployment_timeout)
    elif (processes := process_count_of(config, runs)) > 1:  # every core of this machine
        outcomes = await run_in_processes(runs, processes, logger)
    else:
        outcomes = await asyncio.gather(*(evaluate(settings=settings) for settings in runs),
                                        return_exceptions=True)
    suite = suite_of(runs[0])
    finished, failures, usage, summary = [], [], [], []
    done: list[tuple[RunSettings, dict[str, Any]]] = []
    for settings, outcome in zip(runs, outcomes):
        model, judge = settings.model_under_test.model, settings.judge_name
        if isinstance(outcome, BaseException):
            failures.append({"model": model, "judge": judge,
                             "error": str(outcome) or type(outcome).__name__})
            logger.error("%s judged by %s failed: %s", model, judge, failures[-1]["error"])
        else:
            finished.append(next(stage["key"] for stage in outcome["stages"]
                                 if stage["stage"] == suite.stages.judgments))
            usage.append(outcome["usage"])
            done.append((settings, outcome))
            scored, total, _ = outcome["coverage"]
            summary.append(f"{model} judged by {judge}: {scored} of {total} "
                           f"{suite.sample_noun} scored")
            shortfall = coverage_problem(suite, outcome["coverage"], settings.min_coverage,
                                         located_causes(settings, outcome.get("causes")))
            if shortfall is not None:  # ranked, but the night is not a success
                failures.append({"model": model, "judge": judge, "error": shortfall})
                logger.warning("%s judged by %s: %s", model, judge, shortfall)
    out = Path(config.out) if config.out else None
    board = sweep_report(suite, store, out, finished, seed=BOOTSTRAP_SEED) if finished \
        else None
    pairs: list[dict[str, Any]] = []
    findings: list[Finding] = []
    try:
        if done:
            pairs, findings = record_night(config, suite, store, night, run_id, done, changed,
                                           out)
    except Exception as exc:  # the night's results stand; only its history entry is missing
        failures.append({"model": "-", "judge": "-",
                         "error": f"the night was not recorded in the history: {exc}"})
        logger.error("%s", failures[-1]["error"])
    for finding in findings:
        logger.warning("%s", finding.line())
    emit_findings(findings)
    # The night's own copies (results/history/night_pages.py) beside the latest, in `out`.
    own = night_folder(out, night_name(night, run_id)) if out is not None and pairs else None
    if out is not None:
        section = findings_section(findings, [c.line() for c in changed])
        for folder in (out, own) if own is not None else (out,):
            add_to_report(folder / "report.html", section)
    # Stable keys per series: the Prefect UI shows each night's version of them one after the
    # other, and two series never overwrite each other's. A sweep without a name is the series
    # "sweep": sweep-leaderboard and sweep-report, as before series had names.
    series = series_slug(config.name)
    if board is not None and out is not None:
        report = own / "report.html" if own is not None and (own / "report.html").exists() \
            else out / "report.html"
        await acreate_link_artifact(key=f"{series}-report", link=report.resolve().as_uri(),
                                    link_text="report.html",
                                    description=f"{suite.display_name} sweep report")
    headline = suite.headline(board) if board is not None else ([], [])
    markdown = _markdown(suite.display_name, headline, failures,
                         _cost_lines(usage) + probe_cost_lines(probes),
                         summary_lines(findings, changed))
    await acreate_markdown_artifact(key=f"{series}-leaderboard", markdown=markdown,
                                    description=f"{config.name}: {suite.display_name} sweep "
                                                "leaderboard")
    if pairs:
        await acreate_table_artifact(key=f"{series}-scores",
                                     table=score_rows(suite, night, pairs),
                                     description=f"{config.name}: scores of the night")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "sweep.md", markdown.encode())
        if own is not None and own.is_dir():
            write_atomic(own / "sweep.md", markdown.encode())
    return {"leaderboard": board.to_dicts() if board is not None else [], "failures": failures,
            "succeeded": len(finished), "summary": summary,
            "findings": [f.as_dict() for f in findings],
            "changes": [c.line() for c in changed]}
