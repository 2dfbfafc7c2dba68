"""Options shared by the commands: role, store, database, selection and batch options, the
one-line usage errors, and the run settings read back from them (their values' checks are
option_types.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, NoReturn

from ..common.errors import UserError
from ..common.postgres import DATABASE_ENV, check_database_url, default_database
from ..common.postgres_wait import DATABASE_WAIT_ENV, DEFAULT_WAIT_S
from ..config.effective import safety_settings_off
from ..config.settings import (DEFAULT_STORE_ENV, DEFAULT_SUITE, CorpusSource,
                               ModelRole, RunSettings, RuntimeOptions, default_store,
                               role_generation)
from .interrupts import EXIT_DATABASE_LOST as EXIT_DATABASE_LOST
from .interrupts import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from .interrupts import EXIT_LOW_COVERAGE as EXIT_LOW_COVERAGE
from .interrupts import EXIT_USER_ERROR as EXIT_USER_ERROR
from .option_types import (batch_mode, max_tokens, non_negative_float, optional_str,
                           positive_float, store_location, temperature, top_p)
from .suite_options import parts_from_args, suite_options_from_args


EPILOG = """\
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


def add_store_option(parser) -> None:
    parser.add_argument("--store", metavar="DIR|URL", default=None, type=store_location,
                        help=f"artifact store: a folder, or s3://bucket/prefix with credentials "
                             f"and endpoint in AWS_* variables (default: ${DEFAULT_STORE_ENV} "
                             "or ./.proactflow)")


def add_database_option(parser) -> None:
    parser.add_argument("--database", metavar="URL", default=None,
                        help="postgresql://user@host:port/db holding the per-call cache, its "
                             "leases and the rate limits, shared exactly by runs on every host "
                             f"(default: ${DATABASE_ENV}, else the store's own); the password "
                             "comes from PGPASSWORD or ~/.pgpass, never the URL")


    parser.add_argument("--database-wait", metavar="SECONDS", default=None,
                        type=non_negative_float,
                        help="how long (0 or more) to wait for the database when it goes "
                             "away mid-run (a "
                             "restart, a failover): statements are tried again with backoff, "
                             "a line says so after 3 s; then the run stops with exit status 1, "
                             "answers paid for kept on this host for the next run (default: "
                             f"${DATABASE_WAIT_ENV}, else {DEFAULT_WAIT_S:g})")


def forget_what_endpoints_said() -> None:
    """Each command learns its endpoints anew: what one lists at /models, whether it has a batch
    API, which structured-output formats it takes. A process running several commands (a test,
    a caller of cli.main) would else keep what an earlier endpoint at the same URL said."""
    from ..batches.probe import forget_probes
    from ..config.endpoints import forget_listings
    from ..providers.structured_output import forget_all

    forget_listings()
    forget_probes()
    forget_all()


def database_from_args(args: argparse.Namespace) -> str | None:
    """The database URL; `--database-wait`, if given, set for this run and its child
    processes."""
    wait = getattr(args, "database_wait", None)
    if wait is not None:
        os.environ[DATABASE_WAIT_ENV] = f"{wait:g}"
    url = getattr(args, "database", None) or default_database()
    return check_database_url(url) if url else None


def add_selection_options(parser) -> None:
    group = parser.add_argument_group(
        "which evaluations (default: every complete one in the store; an evaluation is one "
        "judgments artifact, so two prompts, settings or trigger sets are separate rows)")
    group.add_argument("--run", action="append", metavar="ID",
                       help="only the evaluation of this run (a prefix of its id or record "
                            "file name; repeatable; see 'proactflow runs ls')")
    group.add_argument("--model", dest="select_models", action="append", metavar="MODEL",
                       help="only evaluations of this model under test (repeatable)")
    group.add_argument("--corpus-revision", metavar="REV",
                       help="only ProactBench evaluations on this corpus revision (a "
                            "prefix; the other suites are then left out)")
    group.add_argument("--include-incomplete", action="store_true",
                       help="also evaluations whose calls partly failed (their missing "
                            "triggers are counted as not evaluated)")


def selected_evaluations(args: argparse.Namespace, store):
    from ..results.evaluations import stored_evaluations

    return stored_evaluations(store, runs=args.run, models=args.select_models,
                              corpus_revision=args.corpus_revision,
                              include_incomplete=args.include_incomplete)


def add_role_options(parser: argparse.ArgumentParser, prefix: str, label: str,
                      required: bool, default_model: str | None) -> None:
    """`default_model` is only told in the help: the suite decides the default."""
    group = parser.add_argument_group(f"{label} ({prefix}-*)")
    group.add_argument(f"--{prefix}-model", required=required, default=None,
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
    group.add_argument(f"--{prefix}-temperature", type=temperature, metavar="T",
                       default=argparse.SUPPRESS,
                       help="sampling temperature from 0 to 2, or 'none' to send none "
                            "(default: 0.7; 1.0 for reasoning models)")
    group.add_argument(f"--{prefix}-max-tokens", type=max_tokens, metavar="N",
                       default=argparse.SUPPRESS,
                       help="max new tokens, 1 to 1000000 (default: %s; 32768 for reasoning "
                            "models)" % ("8192" if prefix == "eval" else "32768"))
    group.add_argument(f"--{prefix}-top-p", type=top_p, metavar="P",
                       default=argparse.SUPPRESS,
                       help="top_p, above 0 and at most 1, or 'none' (default: 1.0; none for "
                            "reasoning models)")
    group.add_argument(f"--{prefix}-reasoning-effort", type=optional_str, metavar="LEVEL",
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
        group.add_argument("--eval-vision", action="store_true", default=None,
                           help="declare that the model takes images (image_url parts): needed "
                                "by a suite that sends images when litellm's model map does "
                                "not know the model (a model on your own endpoint); without "
                                "it such a run is refused before any call")
        group.add_argument("--eval-system-prompt", metavar="TEXT_OR_@FILE",
                           help="system prompt for the model under test (default: the suite's: "
                                "none in ProactBench, upstream's in ProactiveBench); @path reads "
                                "it from a file")
        group.add_argument("--eval-system-prompt-file", metavar="FILE",
                           help="the same, read from FILE")


class Parser(argparse.ArgumentParser):
    """Usage errors in one line: the usage text of a long command would bury the mistake."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def role_from_args(args: argparse.Namespace, prefix: str, suite: str = DEFAULT_SUITE,
                   options: dict[str, Any] | None = None) -> ModelRole:
    model = getattr(args, f"{prefix}_model")
    explicit: dict[str, Any] = {}
    for field in ("temperature", "max_tokens", "top_p", "reasoning_effort"):
        attribute = f"{prefix}_{field}"
        if hasattr(args, attribute):  # given on the command line ('none' gives None)
            explicit[field] = getattr(args, attribute)
    system_prompt = getattr(args, "eval_system_prompt", None) if prefix == "eval" else None
    prompt_file = getattr(args, "eval_system_prompt_file", None) if prefix == "eval" else None
    if prompt_file:
        if system_prompt:
            raise UserError("give --eval-system-prompt or --eval-system-prompt-file, not both")
        system_prompt = "@" + prompt_file
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
        "model_under_test" if prefix == "eval" else "judge", model, explicit, suite, options)
    return ModelRole(model=model, api_base=getattr(args, f"{prefix}_api_base"),
                     api_key_env=getattr(args, f"{prefix}_api_key_env"), generation=generation,
                     deviations=deviations, revision=getattr(args, f"{prefix}_revision", None),
                     vision=getattr(args, f"{prefix}_vision", None))


def add_batch_options(parser: Any) -> None:
    parser.add_argument(
        "--batch", nargs="?", const="on", type=batch_mode, metavar="auto",
        help="send the calls through the providers' batch APIs, at their batch price (about "
             "half) and within their batch window (up to 24 h): a round of calls per batch, "
             "each batch recorded in the store before the run goes on, so a stopped run "
             "started again waits for its batches instead of paying twice. A model whose "
             "provider has no batch API stops the run before any call; with 'auto' its calls "
             "are interactive (said in the plan). See docs/sweeps.md#batch-mode")
    parser.add_argument("--batch-poll", type=positive_float, metavar="SECONDS",
                        help="--batch: first wait (above 0) between two looks at a batch's "
                             "state, "
                             "growing by half each time up to 10 minutes (default: 30)")
    parser.add_argument(
        "--prompt-cache", choices=("auto", "off"), default=None,
        help="ask the providers' prompt caches to keep what later calls share, billed at "
             "their cache price: Anthropic's cache breakpoints, OpenAI's prompt_cache_key "
             "(default: auto); off sends no hint. See docs/costs.md")


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    from ..suites import get_suite

    suite_name = getattr(args, "suite", None) or DEFAULT_SUITE
    suite = get_suite(suite_name)  # an unknown name is a one-line error listing the known
    if not args.judge_model and suite.default_judge:
        args = argparse.Namespace(**{**vars(args), "judge_model": suite.default_judge})
    if args.judge_response_format and not suite.takes_judge_response_format:
        raise UserError(f"--judge-response-format is not for the {suite_name} suite: its judge "
                        "is asked as the benchmark's own script asks it")
    if not args.judge_model and suite.needs_judge:
        raise UserError(f"the {suite_name} suite needs --judge-model (an LLM judge, or a reward "
                        "model behind --judge-api-base)")
    options = suite_options_from_args(args, suite)
    batch = getattr(args, "batch", None) or "off"
    return RunSettings(
        suite=suite_name,
        suite_options=options,
        model_under_test=role_from_args(args, "eval", suite_name, options).model_copy(
            update={"batch": batch}),
        judge=role_from_args(args, "judge", suite_name, options).model_copy(
            update={"batch": batch}) if args.judge_model else None,
        prompt_files=dict(getattr(args, "prompt", None) or []),
        corpus=CorpusSource(path=args.corpus, revision=args.revision, limit=args.limit,
                            phases=args.phases, parts=parts_from_args(args, suite)),
        samples=args.samples,
        judge_prompt_file=args.judge_prompt,
        judge_response_format=args.judge_response_format or "json_schema",
        store=args.store or default_store(),
        database=database_from_args(args),
        out=args.out,
        runtime=RuntimeOptions(concurrency=args.concurrency, timeout_s=args.timeout,
                               max_attempts=args.max_attempts,
                               retry_base_delay_s=args.retry_delay, rpm=args.rpm,
                               tpm=args.tpm, judge_parse_attempts=args.judge_attempts,
                               model_parse_attempts=getattr(args, "eval_attempts", None) or 5,
                               down_after_s=args.down_after,
                               batch_poll_s=getattr(args, "batch_poll", None) or 30.0,
                               prompt_cache=getattr(args, "prompt_cache", None) or "auto"),
        refresh=args.refresh,
        min_coverage=args.min_coverage,
    )
