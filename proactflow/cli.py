"""The `proactflow` command.

Every user-fixable problem (bad corpus line, missing key, unreachable endpoint, no cached
responses) is found before the first paid call and printed as one line, with exit status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
import threading
from pathlib import Path
from typing import Any

from .errors import UserError
from .evaluations import safe_name
from .effective import safety_settings_off
from .settings import (DEFAULT_STORE_ENV, PAPER_JUDGE, CorpusSource, ModelRole, RunSettings,
                       RuntimeOptions, default_store, role_generation)

EXIT_LOW_COVERAGE = 1
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130

_EPILOG = """\
examples:
  proactflow run --eval-model gpt-4o-mini --judge-model gpt-5.4
  proactflow run --eval-model openai/my-model --eval-api-base http://localhost:8000/v1 \\
                 --judge-model openai/judge --judge-api-base http://localhost:8001/v1 \\
                 --corpus final_dialogues.jsonl --limit 20 --out results/my-model
  proactflow rejudge --eval-model openai/my-model --eval-api-base http://localhost:8000/v1 \\
                 --judge-model anthropic/claude-opus-4-7 --judge-max-tokens 32000

Keys come from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, ... or the variable named by
--eval-api-key-env / --judge-api-key-env); they are never stored or logged. Every finished call
is cached in the store: re-running a command repeats no finished call.
"""


def _optional_float(text: str) -> float | None:
    if text.lower() in ("none", "null", "off"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of 0 or more, got {text!r}")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction such as 0.95 or 95%, "
                                         f"got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction from 0 to 1, got {text!r}")
    return value


def _optional_str(text: str) -> str | None:
    return None if text.lower() in ("none", "null", "off") else text


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number of at least 1, got {value}")
    return value


def _phases(text: str) -> tuple[str, ...]:
    phases = tuple(p.strip().upper() for p in text.split(",") if p.strip())
    unknown = [p for p in phases if p not in ("EMERGENT", "CRITICAL", "RECOVERY")]
    if unknown or not phases:
        raise argparse.ArgumentTypeError(
            f"phases are EMERGENT, CRITICAL, RECOVERY (comma-separated); got {text!r}")
    return phases


def _add_store_option(parser) -> None:
    parser.add_argument("--store", metavar="DIR", default=None,
                        help=f"artifact store root (default: ${DEFAULT_STORE_ENV} or "
                             "./.proactflow)")


def _add_selection_options(parser) -> None:
    group = parser.add_argument_group(
        "which evaluations (default: every complete one in the store; an evaluation is one "
        "judgments artifact, so two prompts, settings or trigger sets are separate rows)")
    group.add_argument("--run", action="append", metavar="ID",
                       help="only the evaluation of this run (a prefix of its id or record "
                            "file name; repeatable; see 'proactflow runs ls')")
    group.add_argument("--model", dest="select_models", action="append", metavar="MODEL",
                       help="only evaluations of this model under test (repeatable)")
    group.add_argument("--corpus-revision", metavar="REV",
                       help="only evaluations on this corpus revision (a prefix)")
    group.add_argument("--include-incomplete", action="store_true",
                       help="also evaluations whose calls partly failed (their missing "
                            "triggers are counted as not evaluated)")


def _selected_evaluations(args: argparse.Namespace, store):
    from .evaluations import stored_evaluations

    return stored_evaluations(store, runs=args.run, models=args.select_models,
                              corpus_revision=args.corpus_revision,
                              include_incomplete=args.include_incomplete)


def _judge_list(text: str) -> list[str]:
    judges = [j.strip() for j in text.split(",") if j.strip()]
    if len(judges) < 2 or len(set(judges)) != len(judges):
        raise argparse.ArgumentTypeError(f"expected two or more distinct judges, got {text!r}")
    return judges


def _add_role_options(parser: argparse.ArgumentParser, prefix: str, label: str,
                      required: bool, default_model: str | None) -> None:
    group = parser.add_argument_group(f"{label} ({prefix}-*)")
    group.add_argument(f"--{prefix}-model", required=required, default=default_model,
                       metavar="MODEL",
                       help=f"litellm model string of the {label}, e.g. gpt-4o-mini, "
                            "anthropic/claude-opus-4-7, openai/NAME with --%s-api-base"
                            % prefix + (f" (default: {default_model})" if default_model else ""))
    group.add_argument(f"--{prefix}-api-base", metavar="URL",
                       help="OpenAI-compatible endpoint (vLLM, Ollama, a proxy), e.g. "
                            "http://localhost:8000/v1")
    group.add_argument(f"--{prefix}-api-key-env", metavar="VAR",
                       help="environment variable holding this role's API key (default: the "
                            "provider's usual one; not needed for a local openai/ endpoint)")
    group.add_argument(f"--{prefix}-temperature", type=_optional_float, metavar="T",
                       default=argparse.SUPPRESS,
                       help="sampling temperature, or 'none' to send none (default: 0.7; 1.0 "
                            "for reasoning models)")
    group.add_argument(f"--{prefix}-max-tokens", type=_positive_int, metavar="N",
                       default=argparse.SUPPRESS,
                       help="max new tokens (default: %s; 32768 for reasoning models)"
                            % ("8192" if prefix == "eval" else "32768"))
    group.add_argument(f"--{prefix}-top-p", type=_optional_float, metavar="P",
                       default=argparse.SUPPRESS,
                       help="top_p, or 'none' (default: 1.0; none for reasoning models)")
    group.add_argument(f"--{prefix}-reasoning-effort", type=_optional_str, metavar="LEVEL",
                       default=argparse.SUPPRESS,
                       help="reasoning effort for reasoning models, or 'none' (default: %s)"
                            % ("none" if prefix == "eval" else "medium for reasoning models"))
    group.add_argument(f"--{prefix}-gemini-safety-off", action="store_true",
                       help="Gemini only: send its four harm filters at BLOCK_NONE, as the "
                            "benchmark's own Gemini client does (enters the cache key)")
    group.add_argument(f"--{prefix}-revision", metavar="LABEL",
                       help="a label of your own for what serves this model (checkpoint, "
                            "deployment date): a new label asks every call again instead of "
                            "reusing cached answers")
    if prefix == "eval":
        group.add_argument("--eval-system-prompt", metavar="TEXT_OR_@FILE",
                           help="system prompt for the model under test (default: none, as in "
                                "the protocol); @path reads it from a file")


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line: the usage text of a long command would bury the mistake."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="proactflow",
        description="Measure how proactive an LLM is on ProactBench: regenerate the assistant "
                    "reply at each of the corpus's trigger points, have a judge score it against "
                    "the trigger's rubric, and report PASS/PARTIAL/FAIL rates per phase. Every "
                    "stage is a cached Parquet artifact, run as a Prefect flow.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    specs = {
        "run": "generate responses, judge them and score each phase",
        "rejudge": "judge cached responses again (new judge or prompt): no generation calls",
        "status": "show what the store holds for these settings: calls cached, failed and "
                  "still to make, and each stage's artifact; makes no call",
    }
    for name, summary in specs.items():
        sub = commands.add_parser(name, help=summary, description=summary + ".",
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog=_EPILOG)
        _add_role_options(sub, "eval", "model under test", required=name != "rejudge",
                          default_model=None)
        _add_role_options(sub, "judge", "judge", required=False, default_model=PAPER_JUDGE)
        judge = sub.add_argument_group("judge prompt")
        judge.add_argument("--judge-prompt", metavar="FILE",
                           help="judge system prompt file (default: the upstream prompt, "
                                "downloaded once at its pinned commit and cached in the store)")
        judge.add_argument("--judge-attempts", type=_positive_int, default=4, metavar="N",
                           help="judge calls per response while its reply is not a valid "
                                "verdict (malformed JSON, unknown score), before it becomes a "
                                "judge_error row (default: 4)")
        judge.add_argument("--judge-response-format", default="json_schema",
                           choices=("json_schema", "json_object", "none"),
                           help="structured output requested from the judge (default: "
                                "json_schema; use json_object or none for servers without it)")
        corpus = sub.add_argument_group("corpus")
        corpus.add_argument("--corpus", metavar="FILE",
                            help="local final_dialogues.jsonl (default: bosonai/proactbench "
                                 "from the Hugging Face hub)")
        corpus.add_argument("--revision", metavar="REV",
                            help="hub revision (commit sha, tag, branch) to pin; the commit "
                                 "actually used is recorded either way")
        corpus.add_argument("--limit", type=_positive_int, metavar="N",
                            help="evaluate only the first N dialogues")
        corpus.add_argument("--samples", type=_positive_int, default=1, metavar="K",
                            help="draw K responses per trigger and judge each (default: 1); "
                                 "with K > 1, --out adds trigger_scores.csv with each trigger's "
                                 "mean score and its variance across samples")
        corpus.add_argument("--phases", type=_phases, metavar="LIST",
                            default=("EMERGENT", "CRITICAL", "RECOVERY"),
                            help="comma-separated phases to evaluate (default: all three)")
        where = sub.add_argument_group("store and outputs")
        _add_store_option(where)
        where.add_argument("--out", metavar="DIR",
                           help="also write phase_scores.csv/.parquet, results.jsonl and "
                                "metrics.json (upstream's shapes) here")
        run = sub.add_argument_group("execution")
        run.add_argument("--concurrency", type=_positive_int, default=16, metavar="N",
                         help="calls in flight per role (default: 16)")
        run.add_argument("--timeout", type=_positive_float, metavar="SECONDS",
                         help="per-call timeout; a call that times out is not retried, the "
                              "provider may have billed it (default: 60 s + 40 ms per max "
                              "token: 388 s at 8192)")
        run.add_argument("--max-attempts", type=_positive_int, default=6, metavar="N",
                         help="tries per call on 429/5xx/timeouts, with exponential backoff "
                              "(default: 6)")
        run.add_argument("--retry-delay", type=_non_negative_float, default=1.0,
                         metavar="SECONDS",
                         help="first backoff delay, doubled on each retry up to 60 s, with "
                              "jitter; a Retry-After header wins when longer (default: 1)")
        run.add_argument("--down-after", type=_positive_float, default=60.0, metavar="SECONDS",
                         help="declare the endpoint down and stop after this long without a "
                              "successful call while calls keep failing; 429s (rate limiting) "
                              "never count (default: 60)")
        run.add_argument("--refresh", choices=("responses", "judgments", "all"),
                         help="ask again instead of reusing cached answers of that stage (a "
                              "model or judge that changed behind the same name)")
        run.add_argument("--min-coverage", type=_fraction, metavar="FRACTION",
                         help="exit with status 1 when fewer than this share of the triggers "
                              "is scored (e.g. 0.95); default: when any trigger was lost to a "
                              "failed call")
        run.add_argument("--rpm", type=_positive_float, metavar="N",
                         help="at most N requests per minute per role, shared by every run "
                              "using the same store (default: no limit)")
        run.add_argument("--tpm", type=_positive_float, metavar="N",
                         help="at most N tokens (prompt + completion) per minute per role, "
                              "shared likewise; paced on estimates, corrected by actual usage")
        run.add_argument("--dry-run", action="store_true",
                         help="validate, check access and print the plan; make no call")
        if name == "rejudge":
            judge.add_argument("--all-models", action="store_true",
                               help="instead of --eval-model: re-judge the stored responses of "
                                    "every complete evaluation in the store (runs and imports "
                                    "alike; narrowed by --limit/--phases and the options "
                                    "below), after printing the plan; --dry-run stops there")
            _add_selection_options(sub)
            judge.add_argument("--judges", type=_judge_list, metavar="A,B,...",
                               help="re-judge with each of these judges in turn (same "
                                    "--judge-* options for all), then report their agreement: "
                                    "percent agreement, Cohen's kappa, quadratic-weighted kappa, "
                                    "confusion matrices and the disagreeing triggers")
        sub.set_defaults(handler=_run_command)

    imports = commands.add_parser(
        "import", help="store published per-dialogue results files as responses + judgments",
        description="Store upstream per-dialogue results files (*_results.jsonl, as released "
                    "for the published models) as responses and judgments, labelled with their "
                    "model and judge, so they can be reported, compared or re-judged without "
                    "paying for generation. Triggers of the corpus missing from a file are "
                    "recorded as generation errors.")
    imports.add_argument("files", nargs="+", metavar="FILE", help="results files to import")
    imports.add_argument("--corpus", required=True, metavar="PATH",
                         help="the corpus the results were produced on (final_dialogues.jsonl)")
    _add_store_option(imports)
    imports.add_argument("--judge-model", default=PAPER_JUDGE, metavar="NAME",
                         help=f"the judge that labelled the files (default: {PAPER_JUDGE})")
    imports.add_argument("--model", metavar="NAME",
                         help="model name to record (default: the file's evaluated_model, or "
                              "its file name when that is a placeholder); one FILE only")
    imports.set_defaults(handler=_import_command)

    report = commands.add_parser(
        "report", help="leaderboard with confidence intervals, metrics and an HTML report",
        description="Build a leaderboard over every (model, judge) in the store with 95 %% "
                    "bootstrap intervals that resample dialogues, upstream-shaped metrics per "
                    "(model, judge), and a self-contained report.html.")
    _add_store_option(report)
    report.add_argument("--out", required=True, metavar="DIR",
                        help="writes leaderboard.csv/.parquet, report.html and "
                             "metrics/<model>__<judge>.json here")
    report.add_argument("--bootstrap", type=_positive_int, default=1000, metavar="N",
                        help="bootstrap resamples (default: 1000)")
    report.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    _add_selection_options(report)
    report.set_defaults(handler=_report_command)

    sweep = commands.add_parser(
        "sweep", help="evaluate many models from a TOML file, then build a leaderboard",
        description="Evaluate every model of a sweep file with every judge (each an 'evaluate' "
                    "subflow, all at once), then write a leaderboard. A model that fails does "
                    "not stop the others. Exit status 1 when any failed. See proactflow/sweeps.py "
                    "or the README for the file format.")
    sweep.add_argument("--config", required=True, metavar="FILE", help="the sweep TOML file")
    sweep.set_defaults(handler=_sweep_command)

    serve = commands.add_parser(
        "serve", help="run a sweep on a cron schedule in this process (no work pool needed)",
        description="Serve the sweep flow with a cron schedule from this process (Prefect's "
                    "flow.serve): it runs the sweep file at every tick until stopped. Schedules "
                    "need a real Prefect server: start one with 'prefect server start' and set "
                    "PREFECT_API_URL.")
    serve.add_argument("--config", required=True, metavar="FILE", help="the sweep TOML file")
    serve.add_argument("--cron", default="0 2 * * *", metavar="EXPR",
                       help="cron schedule in UTC (default: '0 2 * * *', 02:00 daily)")
    serve.add_argument("--name", default="nightly-sweep", help="deployment name "
                       "(default: nightly-sweep)")
    serve.set_defaults(handler=_serve_command)
    return parser


def _role(args: argparse.Namespace, prefix: str) -> ModelRole:
    model = getattr(args, f"{prefix}_model")
    explicit: dict[str, Any] = {}
    for field in ("temperature", "max_tokens", "top_p", "reasoning_effort"):
        attribute = f"{prefix}_{field}"
        if hasattr(args, attribute):  # given on the command line ('none' gives None)
            explicit[field] = getattr(args, attribute)
    system_prompt = getattr(args, "eval_system_prompt", None) if prefix == "eval" else None
    if system_prompt and system_prompt.startswith("@"):
        try:
            system_prompt = Path(system_prompt[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot read system prompt file {system_prompt[1:]}: "
                            f"{exc.strerror}") from None
    if system_prompt:
        explicit["system_prompt"] = system_prompt
    if getattr(args, f"{prefix}_gemini_safety_off", False):
        safety_settings_off(model)  # a one-line error for a model without these filters
        explicit["gemini_safety_off"] = True
    generation, deviations = role_generation(
        "model_under_test" if prefix == "eval" else "judge", model, explicit)
    return ModelRole(model=model, api_base=getattr(args, f"{prefix}_api_base"),
                     api_key_env=getattr(args, f"{prefix}_api_key_env"), generation=generation,
                     deviations=deviations, revision=getattr(args, f"{prefix}_revision", None))


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    return RunSettings(
        model_under_test=_role(args, "eval"),
        judge=_role(args, "judge"),
        corpus=CorpusSource(path=args.corpus, revision=args.revision, limit=args.limit,
                            phases=args.phases),
        samples=args.samples,
        judge_prompt_file=args.judge_prompt,
        judge_response_format=args.judge_response_format,
        store=args.store or default_store(),
        out=args.out,
        runtime=RuntimeOptions(concurrency=args.concurrency, timeout_s=args.timeout,
                               max_attempts=args.max_attempts,
                               retry_base_delay_s=args.retry_delay, rpm=args.rpm,
                               tpm=args.tpm, judge_parse_attempts=args.judge_attempts,
                               down_after_s=args.down_after),
        refresh=args.refresh,
        min_coverage=args.min_coverage,
    )


def _print_scores(scores: list[dict[str, Any]], complete: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}"

    if not scores:
        return
    table = Table(title=f"ProactBench: {scores[0]['model']} judged by {scores[0]['judge']}")
    for column in ("phase", "triggers", "evaluated", "pass", "partial", "fail",
                   "not evaluated", "pass %", "partial %", "weighted %"):
        table.add_column(column, justify="left" if column == "phase" else "right")
    for row in scores:
        table.add_row(row["phase"], str(row["triggers"]), str(row["evaluated"]),
                      str(row["pass"]), str(row["partial"]), str(row["fail"]),
                      str(row["not_evaluated"]), pct(row["pass_rate"]),
                      pct(row["partial_rate"]), pct(row["weighted_score"]))
    console = Console(width=None if sys.stdout.isatty() else 120)
    console.print(table)
    if not complete:
        console.print("[yellow]Some calls failed (counted as not evaluated above). Run the same "
                      "command again to retry only those.[/yellow]")


class _NoUserErrorTraceback(logging.Filter):
    """Keeps Prefect's console lines about a user-fixable failure (and about the stage stopped by
    it) but drops the traceback: the CLI ends with the one-line error. The Prefect UI still gets
    the full record."""

    def filter(self, record: logging.LogRecord) -> bool:
        from .streaming import StageAborted

        if record.exc_info and isinstance(record.exc_info[1], (UserError, StageAborted)):
            record.exc_info = None
            record.exc_text = None
        return True


def _quiet_console_tracebacks() -> None:
    from prefect.logging.configuration import setup_logging

    setup_logging()
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, _NoUserErrorTraceback) for f in handler.filters):
            handler.addFilter(_NoUserErrorTraceback())


def _preflight(args: argparse.Namespace, settings: RunSettings) -> bool:
    """Validate, check access and print the plan; True when the flow should run.

    Kept apart from the run so that the corpus and tables it loads are freed before the flow
    starts (the flow reloads what it needs from the store).
    """
    from .pipeline import (load_judge_prompt, materialize_triggers, open_call_cache,
                           open_store, stored_responses, with_endpoint_fingerprints)
    from .preflight import check_access, make_plan, stage_states
    from .sources import locate_corpus

    regenerate = args.command != "rejudge"
    store = open_store(settings)
    corpus = locate_corpus(settings.corpus)
    triggers, _ = materialize_triggers(settings, store, corpus)  # validates a new corpus
    prompt = load_judge_prompt(settings, store)
    if args.command == "run":
        check_access(settings.model_under_test, "model under test")
    if args.command != "status":
        check_access(settings.judge, "judge")
    # The plan's cached counts use the keys the run will use, fingerprints included.
    settings = with_endpoint_fingerprints(
        settings, ("judge",) if args.command == "rejudge" else ("model_under_test", "judge"))
    calls = open_call_cache(store)
    try:
        responses = None if regenerate else stored_responses(settings, store, triggers).frame()
        plan = make_plan(settings, triggers, calls, prompt, responses)
    finally:
        calls.close()
    for line in plan.lines(settings, corpus.revision, regenerate):
        print(line, flush=True)
    if settings.refresh:
        print(f"refresh     {settings.refresh}: cached answers of "
              f"{'both stages' if settings.refresh == 'all' else 'the ' + settings.refresh}"
              " are asked again", flush=True)
    if args.command == "status":
        for line in stage_states(settings, store, triggers, prompt):
            print(line)
        return False
    return not args.dry_run


def _start_temporary_prefect_server() -> threading.Thread | None:
    """Without PREFECT_API_URL, Prefect starts a temporary server at the first flow run, which
    takes seconds: start it in the background now, while the preflight checks run."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return None

    def start() -> None:
        from prefect.server.api.server import SubprocessASGIServer

        SubprocessASGIServer().start()

    thread = threading.Thread(target=start, name="prefect-server-start", daemon=True)
    thread.start()
    return thread


def _run_command(args: argparse.Namespace) -> int:
    if args.command == "rejudge":
        if getattr(args, "all_models", False):
            return _rejudge_all(args)
        if not args.eval_model:
            raise UserError("rejudge needs --eval-model MODEL (with the settings of the run that "
                            "produced the responses) or --all-models")
    judges = getattr(args, "judges", None)
    if judges:
        return _rejudge_many(args, judges)
    settings = settings_from_args(args)
    if args.command != "status" and not args.dry_run:
        _check_prefect_server()
    starting = None if args.command == "status" or args.dry_run \
        else _start_temporary_prefect_server()
    if not _preflight(args, settings):
        return 0
    gc.collect()
    # Everything alive now (imported modules, mostly) lives for the whole run: keep the
    # collector from walking it again on each of the run's many collections.
    gc.freeze()
    if starting is not None:
        starting.join()  # the flow's client must find the server up, not half started
    result = _run_flow(args.command, settings)
    _print_scores(result["scores"], result["complete"])
    _print_usage(result["usage"])
    for path in result["outputs"].values():
        print(f"wrote {path}")
    print(f"run record: {result['record']}")
    return _coverage_status(result["scores"], settings.min_coverage)


def _dollars(cost: float | str) -> str:
    return f"${cost:.4f}" if cost != "unknown" else "unknown (not in litellm's price map)"


def _print_usage(usage: dict[str, Any]) -> None:
    for role, used in usage.items():
        print(f"{role.replace('_', ' ')} {used['model']}: paid this run "
              f"{used['paid_prompt_tokens']} prompt + {used['paid_completion_tokens']} "
              f"completion tokens, {_dollars(used['paid_cost_usd'])}; results worth "
              f"{used['prompt_tokens']} + {used['completion_tokens']} tokens, "
              f"{_dollars(used['estimated_cost_usd'])}")


def _coverage_status(scores: list[dict[str, Any]], min_coverage: float | None) -> int:
    """1 when too few triggers were scored, so that cron and CI see a bad night; else 0."""
    from .pipeline import coverage_problem

    problem = coverage_problem(scores, min_coverage)
    if problem is None:
        return 0
    print(f"proactflow: {problem}", file=sys.stderr)
    return EXIT_LOW_COVERAGE


def _check_prefect_server() -> None:
    """A Prefect server named by PREFECT_API_URL must answer before any work starts."""
    import urllib.error
    import urllib.request

    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        return
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=5):
            pass
    except urllib.error.HTTPError:
        return  # it answered
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(f"the Prefect server at {url} (PREFECT_API_URL) does not answer "
                        f"({reason}): start it with 'prefect server start', or unset "
                        "PREFECT_API_URL to use a temporary one") from None


def _run_flow(command: str, settings: RunSettings) -> dict[str, Any]:
    from prefect import tags

    from .flows.evaluate import evaluate, rejudge

    _quiet_console_tracebacks()
    with tags("proactbench", f"model:{settings.model_under_test.model}",
              f"judge:{settings.judge.model}"):
        return asyncio.run((evaluate if command == "run" else rejudge)(settings=settings))


def _rejudge_many(args: argparse.Namespace, judges: list[str]) -> int:
    """Re-judge the cached responses with each judge in turn, then report their agreement."""
    base_out = args.out
    frames = []
    for judge in judges:
        one = argparse.Namespace(**{**vars(args), "judge_model": judge, "judges": None,
                                    "out": str(Path(base_out) / safe_name(judge)) if base_out
                                    else None})
        settings = settings_from_args(one)
        print(f"== judge {judge}")
        if not _preflight(one, settings):
            continue
        result = _run_flow("rejudge", settings)
        _print_scores(result["scores"], result["complete"])
        frames.append(_judgments_of(settings, result))
    if len(frames) > 1:
        _report_agreement(frames, base_out)
    return 0


def _rejudge_all(args: argparse.Namespace) -> int:
    """Re-judge the stored responses of every selected evaluation with each judge, after
    printing the plan; then compare the judges."""
    from .cache.artifacts import ArtifactStore
    from .pipeline import load_judge_prompt, open_call_cache
    from .preflight import check_access, make_plan
    from .rejudge_all import plan_lines, run_rejudge, select_stored_responses

    store = ArtifactStore(args.store or default_store())
    entries = select_stored_responses(
        store, runs=args.run, models=args.select_models, corpus_revision=args.corpus_revision,
        include_incomplete=args.include_incomplete, limit=args.limit, phases=args.phases)
    judges = args.judges or [args.judge_model]
    runs, counts = [], {}
    calls = open_call_cache(store)
    try:
        for judge in judges:
            probe = settings_from_args(argparse.Namespace(**{
                **vars(args), "judge_model": judge, "eval_model": "stored", "out": None}))
            prompt = load_judge_prompt(probe, store)
            if not args.dry_run:
                check_access(probe.judge, "judge")
            for entry in entries:
                name = f"{safe_name(entry.model)}__{safe_name(judge)}"
                if sum(e.model == entry.model for e in entries) > 1:  # keep folders apart
                    name += f"__{entry.responses_key[:10]}"
                out = str(Path(args.out) / name) if args.out else None
                settings = probe.model_copy(update={"out": out, "model_under_test":
                                                    probe.model_under_test.model_copy(
                                                        update={"model": entry.model})})
                plan = make_plan(settings, store.get_by_key("triggers", entry.triggers_key),
                                 calls, prompt,
                                 store.get_by_key("responses", entry.responses_key).frame())
                counts[(entry.responses_key, judge)] = (plan.judge_calls, plan.judge_cached)
                runs.append((judge, entry, settings))
    finally:
        calls.close()
    for line in plan_lines(entries, judges, counts):
        print(line, flush=True)
    if args.dry_run:
        return 0
    frames, status = [], 0
    for judge, entry, settings in runs:
        print(f"== {entry.model} ({entry.source}, {entry.trigger_set.describe()}) judged by "
              f"{judge}")
        _quiet_console_tracebacks()
        result = run_rejudge(settings, entry)
        _print_scores(result["scores"], result["complete"])
        frames.append(_judgments_of(settings, result))
        status = max(status, _coverage_status(result["scores"], settings.min_coverage))
    if len(judges) > 1:
        _report_agreement(frames, args.out)
    return status


def _judgments_of(settings: RunSettings, result: dict[str, Any]):
    """The judgments table a flow run produced."""
    import polars as pl

    from .cache.artifacts import ArtifactStore

    key = next(stage["key"] for stage in result["stages"] if stage["stage"] == "judgments")
    return pl.read_parquet(ArtifactStore(settings.store).path_for("judgments", key))


def _report_agreement(frames: list, out: str | None) -> None:
    """Print the judges' agreement and, with --out, write agreement.csv and disagreements.csv."""
    import polars as pl

    from .report import write_agreement
    from .stages.agreement import judge_agreement

    table, disagreements = judge_agreement(pl.concat(frames))
    _print_agreement(table)
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        write_agreement(Path(out), table, disagreements)
        print(f"wrote {Path(out) / 'agreement.csv'}\nwrote {Path(out) / 'disagreements.csv'}")


def _print_agreement(table) -> None:
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


def _import_command(args: argparse.Namespace) -> int:
    from .cache.artifacts import ArtifactStore
    from .imports import import_results

    if args.model and len(args.files) > 1:
        raise UserError("--model names one file's model: import the files one at a time")
    store = ArtifactStore(args.store or default_store())
    for file in args.files:
        done = import_results(Path(file), args.corpus, store, judge=args.judge_model,
                              model=args.model)
        print(f"{file}: {done.model} judged by {done.judge}: {done.scored} of "
              f"{done.corpus_triggers} corpus triggers scored, {done.skipped} skipped, "
              f"{done.missing} missing from the file"
              + (f"; {done.unmatched} rows of the file match no dialogue of the corpus"
                 if done.unmatched else ""))
    return 0


def _report_command(args: argparse.Namespace) -> int:
    from .cache.artifacts import ArtifactStore
    from .report import write_report

    store = ArtifactStore(args.store or default_store())
    done = write_report(store, Path(args.out), samples=args.bootstrap, seed=args.seed,
                        evaluations=_selected_evaluations(args, store))
    for line in done["coverage"]:
        print(line)
    for path in done["paths"].values():
        print(f"wrote {path}")
    return 0


def _sweep_command(args: argparse.Namespace) -> int:
    from .pipeline import load_judge_prompt, materialize_triggers, open_store
    from .preflight import check_access
    from .sweeps import load_sweep

    config = load_sweep(args.config)
    runs = config.runs()
    store = open_store(runs[0])
    materialize_triggers(runs[0], store)            # validates the corpus once for all
    load_judge_prompt(runs[0], store)
    for judge in config.judges:
        check_access(judge.role("judge"), "judge")
    skipped, models = [], []
    for model in config.models:
        try:
            check_access(model.role("model_under_test"), "model under test")
        except UserError as exc:
            skipped.append({"model": model.model, "judge": "-", "error": str(exc)})
            print(f"skipping {model.model}: {exc}")
        else:
            models.append(model)
    result: dict[str, Any] = {"failures": [], "leaderboard": []}
    if models:
        from .flows.sweep import sweep

        _quiet_console_tracebacks()
        result = asyncio.run(sweep(config=config.model_copy(update={"models": models})))
    failures = skipped + result["failures"]
    for row in result["leaderboard"]:
        if row["phase"] == "OVERALL":
            score = "-" if row["weighted_score"] is None else f"{100 * row['weighted_score']:.1f}"
            print(f"ok      {row['model']} judged by {row['judge']}: weighted {score} "
                  f"({row['evaluated']} evaluated, {row['not_evaluated']} not)")
    for failure in failures:
        print(f"FAILED  {failure['model']} judged by {failure['judge']}: {failure['error']}")
    return 1 if failures else 0


def _serve_command(args: argparse.Namespace) -> int:
    from prefect.settings import PREFECT_API_URL

    from .sweeps import load_sweep

    config = load_sweep(args.config)
    if not PREFECT_API_URL.value():
        raise UserError("schedules need a running Prefect server: start 'prefect server start' "
                        "and set PREFECT_API_URL (e.g. http://127.0.0.1:4200/api)")
    from .flows.sweep import sweep

    sweep.serve(name=args.name, cron=args.cron, tags=["proactbench", "sweep"],
                parameters={"config": config.model_dump(mode="json")})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UserError as exc:
        print(f"proactflow: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("proactflow: interrupted. Finished calls are cached: run the same command again "
              "to continue.", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
