"""`run`, `rejudge` and `status`: preflight, the flow run and what it prints."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any, Callable

from ..common.errors import UserError
from ..providers.litellm_setup import ready_for_calls, set_up_litellm
from ..common.heap import give_back_freed_heap
from ..common.redaction import redact_url
from ..config.settings import RunSettings
from ..prefect_server.api import prefect_api, reports_to_prefect, start_temporary_server
from .interrupts import run_interruptibly
from .options import EXIT_LOW_COVERAGE, forget_what_endpoints_said, settings_from_args


def print_scores(settings: RunSettings, scores: list[dict[str, Any]], complete: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..run.pipeline import suite_of

    if not scores:
        return
    suite = suite_of(settings)
    columns = suite.console_columns_for(settings)  # not MCQA's cp and agg, nor OEG's acc
    variant = suite.settings_variant(settings)
    table = Table(title=f"{suite.display_name}{', ' + variant.upper() if variant else ''}: "
                        f"{settings.model_under_test.model} judged by {settings.judge_name}")
    for index, (header, _) in enumerate(columns):
        table.add_column(header, justify="left" if index == 0 else "right")
    for row in scores:
        table.add_row(*(show(row) for _, show in columns))
    console = Console(width=None if sys.stdout.isatty() else 120)
    console.print(table)
    if not complete:
        console.print("[yellow]Some samples were not scored (counted apart above); the last "
                      "line says which a re-run asks again.[/yellow]")


def preflight(args: argparse.Namespace, settings: RunSettings,
              checked: Callable[[], None] | None = None) -> bool:
    """Validate, check access and print the plan; True when the flow should run. `checked` is
    called once the corpus, the prompt and access are known to be there (offline, that is
    where a run stops, within seconds).

    Kept apart from the run so that the corpus and tables it loads are freed before the flow
    starts (the flow reloads what it needs from the store).
    """
    from ..run.pipeline import materialize_samples, open_store, stored_responses, suite_of
    from ..run.stage_keys import with_endpoint_fingerprints
    from ..batches.listing import pending_lines
    from ..batches.settle import refresh_all
    from ..batches.roles import check_batch_roles, open_registry
    from ..run.preflight import (called_roles, check_access, lookup_calls, make_plan,
                                 stage_states)

    regenerate = args.command != "rejudge"
    suite, store = suite_of(settings), open_store(settings)
    suite.check_settings(settings)
    source = suite.locate(settings, store)
    generation_prompts = suite.generation_prompts(settings, store)
    judge_prompts = suite.judge_prompts(settings, store)
    unlisted = getattr(args, "allow_unlisted_models", False)
    if args.command == "run" and suite.asks_model:
        check_access(settings.model_under_test, "model under test", unlisted)
    if args.command != "status" and settings.judge is not None:
        check_access(settings.judge, "judge", unlisted)
    # Each endpoint's batch API, read once: --batch without one stops here, before any call.
    check_batch_roles(called_roles(settings, regenerate))
    if checked is not None:
        checked()
    samples, _ = materialize_samples(suite, settings, store, source)  # validates new data
    # The plan's cached counts use the keys the run will use, fingerprints included.
    settings = with_endpoint_fingerprints(
        settings, ("judge",) if args.command == "rejudge" else ("model_under_test", "judge"))
    responses = None if regenerate else stored_responses(
        suite, settings, store, samples, generation_prompts).frame()
    with lookup_calls(store, settings.database) as lookup:  # a database that is down: here
        plan = make_plan(suite, settings, samples, lookup, generation_prompts, judge_prompts,
                         responses)
    for line in plan.lines(settings, source.revision, regenerate,
                           settings.judge_response_format
                           if suite.takes_judge_response_format else None):
        print(line, flush=True)
    if settings.database:
        print(f"database    {redact_url(settings.database)}: the per-call cache, its leases "
              "and the rate limits", flush=True)
    if settings.refresh:
        print(f"refresh     {settings.refresh}: cached answers of "
              f"{'both stages' if settings.refresh == 'all' else 'the ' + settings.refresh}"
              " are asked again", flush=True)
    if args.command == "status":
        for line in stage_states(suite, settings, store, samples, generation_prompts,
                                 judge_prompts):
            print(line)
        registry = open_registry(store.local_dir("batches"), settings.database)
        records, problems = asyncio.run(refresh_all(asyncio.run(registry.records()), registry))
        for line in [*pending_lines(records), *problems]:
            print(line)
        return False
    return not args.dry_run


def quiet_temporary_server() -> None:
    """The temporary Prefect server this command starts sends no telemetry (offline it would
    log an ERROR line per attempt); a server of the user's own keeps its settings."""
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"


def run_command(args: argparse.Namespace) -> int:
    """`run`, `status`, and `rejudge` of one evaluation by one judge (cli/rejudging.py hands
    it those)."""
    from ..run.offline import check_network

    forget_what_endpoints_said()

    def option_checks() -> RunSettings:
        from ..batches.roles import check_batch_roles
        from ..run.pipeline import suite_of
        from ..run.preflight import called_roles, check_vision

        settings = settings_from_args(args)
        suite = suite_of(settings)
        suite.check_settings(settings)
        check_batch_roles(called_roles(settings, args.command == "run"), probe=False)
        if suite.sends_images and args.command == "run" and suite.asks_model:
            check_vision(settings.model_under_test)
        return settings

    # Before the imports that building the settings costs; a judge whose host is out of reach
    # has the option checks made first (a judge the suite refuses is a flag error, not a
    # network one).
    check_network(args, option_checks)
    runs_flow = args.command != "status" and not args.dry_run
    temporary_server = runs_flow and args.temporary_prefect_server
    if temporary_server:  # now: its seconds of start-up overlap everything below
        start_temporary_server()
    settings = option_checks()
    if runs_flow:
        check_prefect_server()
    go = preflight(args, settings)
    if not go:
        return 0
    ready_for_calls()
    give_back_freed_heap()
    result = run_flow("rejudge" if args.command == "rejudge" else "run", settings,
                      temporary_server=temporary_server)
    print_scores(settings, result["scores"], result["complete"])
    print_usage(result["usage"])
    for path in result["outputs"].values():
        print(f"wrote {path}")
    print(f"run record: {result['record']}")
    if getattr(args, "label", None):
        record_labelled_run(args.label, settings, result)
    return coverage_status(settings, result)


def record_labelled_run(label: str, settings: Any, result: dict[str, Any]) -> None:
    """`run --label NAME`: the run is a night of series NAME in the store's history, with its
    changes against the series' night before (proactflow history)."""
    from pathlib import Path

    from ..results.history.nights import now
    from ..run.pipeline import open_store, suite_of
    from ..sweeps.nightly import emit_findings, record_pairs

    run_id = Path(str(result["record"])).name.removesuffix(".json").rsplit("-", 1)[-1]
    _, findings = record_pairs(open_store(settings), suite_of(settings), label, now(), run_id,
                               [(settings, result)], [],
                               Path(settings.out) if settings.out else None)
    print(f"history: a night of series {label!r} ('proactflow history --series {label}')")
    for finding in findings:
        print(finding.line())
    with prefect_api():  # the server the run's flow reported to: the same events as a sweep's
        emit_findings(findings, flush=True)


def _dollars(cost: float | str) -> str:
    return f"${cost:.4f}" if cost != "unknown" else "unknown (not in litellm's price map)"


def _cached(read: int, written: int) -> str:
    """What the provider's prompt cache did with a role's prompt tokens, when it did anything."""
    parts = ([f"{read} cached"] if read else []) + ([f"{written} written to cache"]
                                                   if written else [])
    return f" ({', '.join(parts)})" if parts else ""


def print_usage(usage: dict[str, Any]) -> None:
    for role, used in usage.items():
        paid_cached = _cached(used.get("paid_cache_read_tokens", 0),
                              used.get("paid_cache_write_tokens", 0))
        list_price = used.get("paid_list_cost_usd")
        saved = (f" (list price {_dollars(list_price)})"
                 if paid_cached and list_price not in (None, "unknown") else "")
        print(f"{role.replace('_', ' ')} {used['model']}: paid this run "
              f"{used['paid_prompt_tokens']} prompt{paid_cached} + "
              f"{used['paid_completion_tokens']} completion tokens, "
              f"{_dollars(used['paid_cost_usd'])}{saved}"
              f"{' at batch prices' if used.get('paid_at') else ''}; results worth "
              f"{used['prompt_tokens']}"
              f"{_cached(used.get('cache_read_tokens', 0), used.get('cache_write_tokens', 0))}"
              f" + {used['completion_tokens']} tokens, "
              f"{_dollars(used['estimated_cost_usd'])}")


def coverage_status(settings: RunSettings, result: dict[str, Any]) -> int:
    """1 when too few samples were scored, so that cron and CI see a bad night; else 0."""
    from ..run.pipeline import suite_of
    from ..run.progress import coverage_problem, located_causes

    problem = coverage_problem(suite_of(settings), result["coverage"], settings.min_coverage,
                               located_causes(settings, result.get("causes")))
    if problem is None:
        return 0
    print(f"proactflow: {problem}", file=sys.stderr)
    return EXIT_LOW_COVERAGE


def check_prefect_server() -> None:
    """A Prefect server named by PREFECT_API_URL must answer before any work starts."""
    import urllib.error
    import urllib.request

    if not reports_to_prefect():
        return
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        return
    for timeout in PREFECT_HEALTH_TIMEOUTS_S:
        try:
            with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout):
                return
        except urllib.error.HTTPError:
            return  # it answered
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if not _timed_out(reason):
                break  # refused, unknown host...: nothing to wait for
    waited = f" within {sum(PREFECT_HEALTH_TIMEOUTS_S):g} s" if _timed_out(reason) else ""
    raise UserError(f"the Prefect server at {url} (PREFECT_API_URL) does not answer{waited} "
                    f"({reason}): start it with 'prefect server start', or unset "
                    "PREFECT_API_URL to report to none") from None


PREFECT_HEALTH_TIMEOUTS_S = (5.0, 10.0, 15.0)
"""How long each ask of a Prefect server's health waits: a busy server (a shared one, or one on
a machine whose cores are taken) can be slow to answer without being down, so a timed-out ask is
made again, longer, before the command stops; a refused connection stops it at once."""


def _timed_out(reason: object) -> bool:
    import socket

    return isinstance(reason, (TimeoutError, socket.timeout)) or "timed out" in str(reason)


def run_flow(command: str, settings: RunSettings, *, temporary_server: bool = False,
             **stored: Any) -> dict[str, Any]:
    """The `evaluate` flow (`command` "run") or the `rejudge` one (given `stored`, what
    results/upkeep/rejudge_all.py names) of `settings`: as Prefect flows reporting to
    PREFECT_API_URL's server or, with `temporary_server`, to one of this command's own; else the
    same stages run without Prefect (flows/wiring.py), their progress on standard error."""
    set_up_litellm()  # the flows' bodies do too: for a deployment's worker
    if not temporary_server and not reports_to_prefect():
        from ..flows.wiring import evaluate_untracked, rejudge_untracked
        from ..run.progress import log_stages_to_console

        log_stages_to_console()
        return run_interruptibly(evaluate_untracked(settings) if command == "run"
                                 else rejudge_untracked(settings, **stored))
    from prefect import tags

    from ..flows.evaluate import evaluate, rejudge
    from ..run.progress import quiet_console_tracebacks

    quiet_console_tracebacks()
    quiet_temporary_server()
    with prefect_api(), tags(settings.suite, f"model:{settings.model_under_test.model}",
                             f"judge:{settings.judge_name}"):
        return run_interruptibly(evaluate(settings=settings) if command == "run"
                                 else rejudge(settings=settings, **stored))
