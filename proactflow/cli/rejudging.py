"""`rejudge --judges` and `rejudge --all-models`: several judges, stored responses, agreement."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.errors import UserError
from ..config.settings import PAPER_JUDGE, RunSettings, default_store
from ..results.evaluations import safe_name
from .options import database_from_args, forget_what_endpoints_said, settings_from_args
from .running import coverage_status, preflight, print_scores, run_command, run_flow

if TYPE_CHECKING:
    from ..suites.base import Suite


def rejudge_command(args: argparse.Namespace) -> int:
    """`rejudge`: of every selected evaluation (--all-models), with several judges (--judges),
    or of one evaluation by one judge, which is a run that reuses the stored responses."""
    forget_what_endpoints_said()
    if args.all_models:
        return rejudge_all(args)
    if not args.eval_model:
        raise UserError("rejudge needs --eval-model MODEL (with the settings of the run that "
                        "produced the responses) or --all-models")
    if args.judges:
        return rejudge_many(args, args.judges)
    return run_command(args)


def rejudge_many(args: argparse.Namespace, judges: list[str]) -> int:
    """Re-judge the cached responses with each judge in turn, then report their agreement."""
    from ..suites import get_suite

    suite = get_suite(args.suite)
    if not suite.compares_judges:  # before any call
        raise UserError(f"--judges: the {suite.name} suite reports no agreement between "
                        "judges; re-judge with one judge at a time")
    base_out = args.out
    frames = []
    for judge in judges:
        one = argparse.Namespace(**{**vars(args), "judge_model": judge, "judges": None,
                                    "out": str(Path(base_out) / safe_name(judge)) if base_out
                                    else None})
        settings = settings_from_args(one)
        print(f"== judge {judge}")
        if not preflight(one, settings):
            continue
        result = run_flow("rejudge", settings, temporary_server=args.temporary_prefect_server)
        print_scores(settings, result["scores"], result["complete"])
        frames.append(judgments_of(settings, result))
    if len(frames) > 1:
        report_agreement(suite, frames, base_out)
    return 0


def rejudge_all(args: argparse.Namespace) -> int:
    """Re-judge the stored responses of every selected evaluation with each judge, after
    printing the plan; then compare the judges."""
    from ..batches.roles import check_batch_roles
    from ..cache.artifacts import ArtifactStore
    from ..run.pipeline import suite_of
    from ..run.preflight import check_access, lookup_calls, make_plan
    from ..suites.base import Prompts
    from ..results.upkeep.rejudge_all import plan_lines, rejudge_arguments, select_stored_responses

    store = ArtifactStore(args.store or default_store())
    entries = select_stored_responses(
        store, runs=args.run, models=args.select_models, corpus_revision=args.corpus_revision,
        include_incomplete=args.include_incomplete, limit=args.limit, phases=args.phases)
    judges = args.judges or [args.judge_model or PAPER_JUDGE]
    runs, counts = [], {}
    batching: list[str] = []
    with lookup_calls(store, database_from_args(args)) as lookup:
        for judge in judges:
            probe = settings_from_args(argparse.Namespace(**{
                **vars(args), "judge_model": judge, "eval_model": "stored", "out": None}))
            suite = suite_of(probe)
            if probe.judge is not None:  # refused before any call; said in the plan
                batching.extend(check_batch_roles({"judge": probe.judge}))
            prompts = suite.judge_prompts(probe, store)
            if not args.dry_run and probe.judge is not None:
                check_access(probe.judge, "judge", args.allow_unlisted_models)
            for entry in entries:
                name = f"{safe_name(entry.model)}__{safe_name(judge)}"
                if sum(e.model == entry.model for e in entries) > 1:  # keep folders apart
                    name += f"__{entry.responses_key[:10]}"
                out = str(Path(args.out) / name) if args.out else None
                settings = probe.model_copy(update={"out": out, "model_under_test":
                                                    probe.model_under_test.model_copy(
                                                        update={"model": entry.model})})
                plan = make_plan(suite, settings,
                                 store.get_by_key("triggers", entry.triggers_key), lookup,
                                 Prompts(), prompts,
                                 store.get_by_key("responses", entry.responses_key).frame())
                counts[(entry.responses_key, judge)] = (plan.judge_calls, plan.judge_cached)
                runs.append((judge, entry, settings))
    for line in [*plan_lines(entries, judges, counts), *batching]:
        print(line, flush=True)
    if args.dry_run:
        return 0
    frames, status = [], 0
    for judge, entry, settings in runs:
        print(f"== {entry.model} ({entry.source}, {entry.trigger_set.describe()}) judged by "
              f"{judge}")
        result = run_flow("rejudge", settings, temporary_server=args.temporary_prefect_server,
                          **rejudge_arguments(entry))
        print_scores(settings, result["scores"], result["complete"])
        frames.append(judgments_of(settings, result))
        status = max(status, coverage_status(settings, result))
    if len(judges) > 1:
        report_agreement(suite, frames, args.out)
    return status


def judgments_of(settings: RunSettings, result: dict[str, Any]):
    """The judgments table a flow run produced."""
    from ..cache.artifacts import ArtifactStore

    from ..run.pipeline import suite_of

    stage = suite_of(settings).stages.judgments
    key = next(found["key"] for found in result["stages"] if found["stage"] == stage)
    return ArtifactStore(settings.store).get_by_key(stage, key).frame()


def report_agreement(suite: Suite, frames: list, out: str | None) -> None:
    """Print the judges' agreement and, with --out, write agreement.csv and disagreements.csv."""
    import polars as pl

    from ..suites.report_views import write_agreement

    table, disagreements = suite.judge_agreement(pl.concat(frames))
    print_agreement(table)
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        write_agreement(Path(out), table, disagreements)
        print(f"wrote {Path(out) / 'agreement.csv'}\nwrote {Path(out) / 'disagreements.csv'}")


def print_agreement(table) -> None:
    from rich.console import Console
    from rich.table import Table

    view = Table(title="Judge agreement (scored by both)")
    for column in ("model", "judge A", "judge B", "phase", "n", "agree %", "kappa",
                   "quadratic kappa"):
        view.add_column(column)
    for row in table.iter_rows(named=True):
        fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
        view.add_row(row["model"], row["judge_a"], row["judge_b"], row["phase"], str(row["n"]),
                     "-" if row["percent_agreement"] is None
                     else f"{100 * row['percent_agreement']:.1f}",
                     fmt(row["kappa"]), fmt(row["quadratic_kappa"]))
    Console(width=None if sys.stdout.isatty() else 140).print(view)
