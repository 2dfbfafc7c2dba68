"""`sweep` and `serve`: many models from a TOML file, once or on a schedule."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..common.errors import UserError
from ..providers.litellm_setup import ready_for_calls
from ..common.postgres import check_database_url, check_reachable
from ..common.redaction import FULL_URLS_ENV, full_urls
from ..prefect_server.api import api_url, prefect_api, start_temporary_server
from ..run.progress import quiet_console_tracebacks
from .interrupts import run_interruptibly
from .options import database_from_args, forget_what_endpoints_said
from .running import quiet_temporary_server


def sweep_command(args: argparse.Namespace) -> int:
    from ..run.pipeline import materialize_samples, open_store, suite_of
    from ..run.preflight import check_vision
    from ..sweeps.sweep_file import load_sweep

    start_temporary_server()  # first thing: it boots while the sweep's imports and checks run
    forget_what_endpoints_said()
    config = load_sweep(args.config)
    database_from_args(args)  # --database-wait, for the pairs' processes too
    if args.database:
        config = config.model_copy(update={"database": check_database_url(args.database)})
    if args.processes is not None:
        if config.deployment:
            raise UserError("--processes spreads a sweep over this machine; with a deployment "
                            "the pool's workers run the pairs (start more workers instead)")
        config = config.model_copy(update={"processes": args.processes})
    if args.refresh_on_change:
        config = config.model_copy(update={"refresh_on_change": True})
    if args.batch:  # the file's default for entries that do not say
        config = config.model_copy(update={"batch": True if args.batch == "on" else "auto"})
    if args.batch_poll is not None:
        config = config.model_copy(update={"batch_poll": args.batch_poll})
    if getattr(args, "prompt_cache", None) is not None:
        config = config.model_copy(update={"prompt_cache": args.prompt_cache})
    runs = config.runs()
    # As `run --database` finds it: in one line, before any pair starts. (A deployment's
    # workers connect from their own network, where its name may be all that resolves.)
    if runs[0].database and not config.deployment:
        check_reachable(runs[0].database)
    if not config.deployment:
        _prestart_process_groups(config, runs)
    if config.deployment:
        from prefect.settings import PREFECT_API_URL

        from ..sweeps.deployed import check_deployment

        if not PREFECT_API_URL.value():
            raise UserError(f"deployment {config.deployment} needs the Prefect server its "
                            "workers use: set PREFECT_API_URL (e.g. http://prefect.lan:4200/api)")
        check_deployment(config.deployment)
    store = open_store(runs[0])
    suite = suite_of(runs[0])
    suite.check_settings(runs[0])
    if runs[0].corpus.parts and not suite.takes_parts:
        raise UserError(f"parts is the video ProactiveBench's; {suite.name} has none")
    materialize_samples(suite, runs[0], store)     # validates the data once for all
    suite.generation_prompts(runs[0], store)
    suite.judge_prompts(runs[0], store)
    # With a deployment the workers make the calls, with their keys and their network: a pair
    # they cannot serve fails there, with its reason.
    def access(role: Any, kind: str) -> None:
        if not config.deployment:
            checked_access(role, kind, config.allow_unlisted_models)
    for judge in config.judges:
        access(judge.role("judge", config.suite, batch=config.batch), "judge")
    skipped, models = [], []
    for model in config.models:
        try:
            role = model.role("model_under_test", config.suite, batch=config.batch)
            if suite.sends_images:
                check_vision(role)  # before any network check
            access(role, "model under test")
        except UserError as exc:
            skipped.append({"model": model.model, "judge": "-", "error": str(exc)})
            print(f"skipping {model.model}: {exc}")
        else:
            models.append(model)
    from ..sweeps.nightly import planned_probe_line

    if (probe_line := planned_probe_line(config, runs, store)) is not None:
        print(probe_line)
    result: dict[str, Any] = {"failures": [], "leaderboard": []}
    if models:
        from ..flows.sweep import sweep
        from ..sweeps.process_groups import stop_children

        quiet_console_tracebacks()
        quiet_temporary_server()
        ready_for_calls()
        with prefect_api():
            result = run_interruptibly(sweep(config=config.model_copy(update={"models": models})),
                                       stop_others=stop_children)
    failures = skipped + result["failures"]
    if not any("phase" in row for row in result["leaderboard"]):  # a suite without phases
        for line in result.get("summary", []):
            print(f"ok      {line}")
    for row in result["leaderboard"]:
        if row.get("phase") == "OVERALL":
            score = "-" if row["weighted_score"] is None else f"{100 * row['weighted_score']:.1f}"
            print(f"ok      {row['model']} judged by {row['judge']}: weighted {score} "
                  f"({row['evaluated']} evaluated, {row['not_evaluated']} not)")
    for failure in failures:
        print(f"FAILED  {failure['model']} judged by {failure['judge']}: {failure['error']}")
    for line in result.get("changes", []):
        print(f"CHANGED {line}")
    regressions = [f for f in result.get("findings", []) if f["kind"] == "regression"]
    for finding in result.get("findings", []):
        where = ", ".join(part for part in (finding.get("variant"), finding["group"]) if part)
        print(f"{finding['kind'].upper():<12}{finding['model']} judged by {finding['judge']} "
              f"({where}): {finding['metric']} {100 * finding['delta']:+.1f} points "
              f"[{100 * finding['ci_low']:+.1f}, {100 * finding['ci_high']:+.1f}], "
              f"{len(finding['changed'])} samples changed verdict"
              + (f" ({finding['before']} -> {finding['after']}, not consecutive: "
                 f"{'; '.join(finding['skipped'])} between)" if finding.get("skipped") else ""))
    return 1 if failures or (regressions and args.fail_on_regression) else 0


def checked_access(role: Any, kind: str, unlisted: bool = False) -> None:
    """A role's endpoint answers, serves the model (unless `unlisted` allows a name its list
    lacks), and has the batch API its batch mode asks for (read once: the pairs' processes
    read it again, for `batch = "auto"`)."""
    from ..batches.roles import check_batch_roles
    from ..run.preflight import check_access

    check_access(role, kind, unlisted)
    check_batch_roles({kind.replace(" ", "_"): role})


def _prestart_process_groups(config: Any, runs: list[Any]) -> None:
    """The sweep's other processes, started now so that their imports overlap the checks
    below (process_groups.prestart)."""
    from ..flows.sweep import process_count_of
    from ..sweeps.process_groups import prestart

    url = api_url()
    processes = process_count_of(config, runs)
    if url and processes > 1:
        prestart(processes - 1, url, runs)


def serve_command(args: argparse.Namespace) -> int:
    from prefect.settings import PREFECT_API_URL

    from ..sweeps.sweep_file import load_sweep

    config = load_sweep(args.config)
    # Its parameters show endpoint URLs with credentials masked: its runs find them here.
    try:
        os.environ[FULL_URLS_ENV] = full_urls(
            (entry.api_base for entry in [*config.models, *config.judges]),
            "a schedule's runs could not tell them apart")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if not PREFECT_API_URL.value():
        raise UserError("schedules need a running Prefect server: start 'prefect server start' "
                        "and set PREFECT_API_URL (e.g. http://127.0.0.1:4200/api)")
    from ..flows.sweep import sweep

    sweep.serve(name=args.name, cron=args.cron, tags=[config.suite, "sweep"],
                parameters={"config": config.model_dump(mode="json")})
    return 0
