"""Prefect flow `sweep`: evaluate many models (each an `evaluate` subflow, all at once), then
build a leaderboard of those that finished. A model that fails does not stop the others; the
summary says which failed and why."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger
from prefect.artifacts import acreate_link_artifact, acreate_markdown_artifact

from proactflow.cache.artifacts import ArtifactStore, write_atomic
from proactflow.flows.evaluate import evaluate
from proactflow.pipeline import coverage_problem
from proactflow.settings import RunSettings
from proactflow.evaluations import Evaluation, evaluation_of
from proactflow.report import write_report
from proactflow.stages.leaderboard import build_leaderboard, with_rank_ranges
from proactflow.sweeps import SweepConfig

BOOTSTRAP_SEED = 0


def _evaluation(settings: RunSettings, result: dict[str, Any]) -> Evaluation:
    key = next(stage["key"] for stage in result["stages"] if stage["stage"] == "judgments")
    store = ArtifactStore(settings.store)
    evaluation = evaluation_of(store, key)
    if evaluation is None:  # the flow just wrote it: its inputs are there
        raise RuntimeError(f"judgments {key} of this sweep lost its inputs")
    return evaluation


def _cost_lines(usage: list[dict[str, Any]]) -> list[str]:
    """Tokens and estimated cost per role over the sweep ("unknown" once any price is)."""
    lines = []
    for role in ("model_under_test", "judge"):
        rows = [u[role] for u in usage]
        prompt = sum(r["prompt_tokens"] for r in rows)
        completion = sum(r["completion_tokens"] for r in rows)
        costs = [r["estimated_cost_usd"] for r in rows]
        cost = "unknown" if "unknown" in costs else f"${sum(costs):.2f}"
        lines.append(f"- {role.replace('_', ' ')}: {prompt} prompt + {completion} completion "
                     f"tokens, estimated cost {cost}")
    return lines


def _markdown(board: pl.DataFrame | None, failures: list[dict[str, str]],
              costs: list[str]) -> str:
    lines = ["# ProactBench sweep", "",
             "| rank | model | judge | weighted score | 95 % CI | pass rate | evaluated | "
             "not evaluated |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    overall = with_rank_ranges(board).filter(pl.col("phase") == "OVERALL").to_dicts() \
        if board is not None else []
    for row in overall:
        pct = lambda v: "–" if v is None else f"{100 * v:.1f}"  # noqa: E731
        lines.append(f"| {row['rank']} | {row['model']} | {row['judge']} | "
                     f"{pct(row['weighted_score'])} | "
                     f"{pct(row['ci_low'])}–{pct(row['ci_high'])} | {pct(row['pass_rate'])} | "
                     f"{row['evaluated']} | {row['not_evaluated']} |")
    if costs:
        lines += ["", "## Tokens and cost", "", *costs]
    if failures:
        lines += ["", "## Failed", ""]
        lines += [f"- **{f['model']}** judged by {f['judge']}: {f['error']}" for f in failures]
    return "\n".join(lines) + "\n"


@flow(name="sweep", persist_result=False)
async def sweep(config: SweepConfig) -> dict[str, Any]:
    """Evaluate every (model, judge) of the sweep concurrently, then rank them."""
    logger = get_run_logger()
    runs = config.runs()
    outcomes = await asyncio.gather(*(evaluate(settings=settings) for settings in runs),
                                    return_exceptions=True)
    finished, failures, usage = [], [], []
    for settings, outcome in zip(runs, outcomes):
        model, judge = settings.model_under_test.model, settings.judge.model
        if isinstance(outcome, BaseException):
            failures.append({"model": model, "judge": judge,
                             "error": str(outcome) or type(outcome).__name__})
            logger.error("%s judged by %s failed: %s", model, judge, failures[-1]["error"])
        else:
            finished.append(_evaluation(settings, outcome))
            usage.append(outcome["usage"])
            shortfall = coverage_problem(outcome["scores"], settings.min_coverage)
            if shortfall is not None:  # ranked, but the night is not a success
                failures.append({"model": model, "judge": judge, "error": shortfall})
                logger.warning("%s judged by %s: %s", model, judge, shortfall)
    out = Path(config.out) if config.out else None
    board = None
    if finished and out is not None:
        # The report covers only this sweep's runs: the store may hold older ones.
        board = write_report(ArtifactStore(runs[0].store), out, seed=BOOTSTRAP_SEED,
                             evaluations=finished)["leaderboard"]
        await acreate_link_artifact(key="sweep-report",
                                    link=(out / "report.html").resolve().as_uri(),
                                    link_text="report.html", description="ProactBench sweep report")
    elif finished:
        board = build_leaderboard(pl.concat([e.judgments for e in finished]), seed=BOOTSTRAP_SEED)
    markdown = _markdown(board, failures, _cost_lines(usage))
    await acreate_markdown_artifact(key="sweep-leaderboard", markdown=markdown,
                                    description="ProactBench sweep leaderboard")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "sweep.md", markdown.encode())
    return {"leaderboard": board.to_dicts() if board is not None else [], "failures": failures,
            "succeeded": len(finished)}
