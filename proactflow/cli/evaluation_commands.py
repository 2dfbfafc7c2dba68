"""The evaluation commands, run, rejudge, status and calibrate: one family sharing its option
groups (model under test, judge, judge prompt, corpus, multimodal, store and outputs,
execution), a few flags differing by command. Apart from parser.py, which holds the
commands that read or tend a store and run sweeps, because these groups are most of the
command line's help text."""

from __future__ import annotations

import argparse
from typing import Any

from ..config.settings import DEFAULT_SUITE, PAPER_JUDGE
from ..limits.model_limits import MAX_CONCURRENCY
from ..suites import command_lines
from .option_types import (fraction, judge_list, number_up_to, phases_list, positive_float,
                           positive_int, prompt_file, whole_number)

MAX_ATTEMPTS = 100
"""Tries of one call or one sample: beyond it, a typo (each try may be paid)."""
MAX_JUDGE_ATTEMPTS = 10
"""RuntimeOptions.judge_parse_attempts' ceiling: upstream Proactive Agent's 10."""
MAX_SAMPLES = 100
MAX_RETRY_DELAY_S = 60.0
"""The backoff's ceiling: a first delay beyond it would be cut to it anyway."""
from .options import (EPILOG, add_batch_options, add_database_option, add_role_options,
                      add_selection_options, add_store_option)
from .rejudging import rejudge_command
from .running import run_command


def add_evaluation_commands(commands: Any) -> None:
    """run, rejudge, status and calibrate, added to `commands` (the top parser's subparsers)."""
    specs = {
        "run": "generate responses, judge them and score each group (ProactBench: phase; "
               "Proactive Agent: split; multimodal: dataset; video: part)",
        "rejudge": "judge cached responses again (new judge or prompt): no generation calls",
        "status": "show what the store holds for these settings: calls cached, failed and "
                  "still to make, and each stage's artifact; makes no call",
    }
    declared = command_lines()
    suites_commands = {command.name: command for line in declared for command in line.commands}
    specs.update({name: command.summary for name, command in suites_commands.items()})
    for name, summary in specs.items():
        sub = commands.add_parser(name, help=summary, description=summary + ".",
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog=EPILOG)
        own = suites_commands.get(name)  # a suite's own command: its model under test fixed
        if own is not None:
            sub.set_defaults(**own.defaults)
        else:
            sub.add_argument("--suite", default=DEFAULT_SUITE, metavar="NAME",
                             help="the benchmark: proactbench (default; ProactBench, Boson AI), "
                                  "proactiveagent (Proactive Agent's ProactiveBench, THUNLP), "
                                  "proactivebench-mllm (the multimodal ProactiveBench) or "
                                  "proactivebench-video (the video ProactiveBench, PAUC)")
            add_role_options(sub, "eval", "model under test", required=name != "rejudge",
                             default_model=None)
        add_role_options(sub, "judge", "judge", required=False,
                         default_model=f"{PAPER_JUDGE} for proactbench; proactiveagent, "
                                       "proactivebench-video and proactivebench-mllm --mode "
                                       "oeg need one")
        sub.add_argument("--allow-unlisted-models", action="store_true",
                         help="ask an endpoint for a model its /v1/models does not list (a "
                              "router that serves names it does not list); without it such a "
                              "run stops before any call, naming the models listed")
        judge = sub.add_argument_group("judge prompt")
        judge.add_argument("--judge-prompt", metavar="FILE",
                           help="judge system prompt file (default: the upstream prompt, "
                                "downloaded once at its pinned commit and cached in the store)")
        judge.add_argument("--prompt", type=prompt_file, action="append", metavar="NAME=FILE",
                           help="another of the suite's prompts from a file of yours "
                                "(proactiveagent: agent_instruction, judge_instruction; the "
                                "system prompts have --eval-system-prompt-file and "
                                "--judge-prompt); repeatable")
        judge.add_argument("--judge-attempts", type=whole_number(1, MAX_JUDGE_ATTEMPTS),
                           metavar="N",
                           help="judge calls per response while its reply is not a valid "
                                "verdict (malformed JSON, unknown score), before it becomes a "
                                "judge_error row; 1 to %d (default: 4; proactiveagent: 10, "
                                "upstream's)" % MAX_JUDGE_ATTEMPTS)
        judge.add_argument("--judge-response-format",
                           choices=("json_schema", "json_object", "none"),
                           help="structured output requested from the judge (default: "
                                "json_schema; use json_object or none for servers without it; "
                                "not for proactiveagent, whose judge is asked as upstream asks)")
        corpus = sub.add_argument_group("corpus")
        corpus.add_argument("--corpus", metavar="PATH",
                            help="proactbench: a local final_dialogues.jsonl (default: "
                                 "bosonai/proactbench from the Hugging Face hub); "
                                 "proactiveagent: a folder holding splits.json and the trace "
                                 "files (default: the pinned upstream commit); "
                                 "proactivebench-video (required): a folder holding "
                                 "<PART>/anno.json and the videos"
                            if own is None else own.corpus_help)
        corpus.add_argument("--revision", metavar="REV",
                            help="hub revision (commit sha, tag, branch) to pin; the commit "
                                 "actually used is recorded either way")
        corpus.add_argument("--limit", type=positive_int, metavar="N",
                            help="evaluate only the first N (at least 1) dialogues "
                                 "(proactiveagent: traces, "
                                 "in name order; proactivebench-mllm: samples of each dataset; "
                                 "proactivebench-video: samples of each part)")
        corpus.add_argument("--samples", type=whole_number(1, MAX_SAMPLES), default=1,
                            metavar="K",
                            help=f"draw K responses per trigger and judge each, 1 to "
                                 f"{MAX_SAMPLES} (default: 1); "
                                 "with K > 1, --out adds trigger_scores.csv with each trigger's "
                                 "mean score and its variance across samples")
        corpus.add_argument("--phases", type=phases_list, metavar="LIST",
                            default=("EMERGENT", "CRITICAL", "RECOVERY"),
                            help="comma-separated phases to evaluate (default: all three)")
        for line in declared:
            if line.corpus_options is not None:
                line.corpus_options(corpus)
        for line in declared:
            if line.option_group is not None:
                line.option_group(sub)
        where = sub.add_argument_group("store and outputs")
        add_store_option(where)
        add_database_option(where)
        where.add_argument("--out", metavar="DIR",
                           help="also write the suite's exports here: ProactBench "
                                "phase_scores.csv/.parquet, results.jsonl and metrics.json "
                                "(upstream's shapes); proactiveagent metrics.csv, metrics.json, "
                                "split_scores.csv, events.csv; proactivebench-mllm metrics.csv "
                                "(a row per dataset and all), metrics.json, samples.csv, "
                                "steps.csv; proactivebench-video metrics.csv (a row per part "
                                "and all), metrics.json, turns.csv, samples.csv, steps.csv")
        run = sub.add_argument_group("execution")
        run.add_argument("--concurrency", type=whole_number(1, MAX_CONCURRENCY), default=16,
                         metavar="N",
                         help="calls in flight per role's model, together with every other "
                              "run calling that model on this store's host or database; 1 "
                              f"to {MAX_CONCURRENCY} (default: 16)")
        run.add_argument("--timeout", type=positive_float, metavar="SECONDS",
                         help="per-call timeout, above 0; a call that times out is not retried, the "
                              "provider may have billed it (default: 60 s + 40 ms per max "
                              "token: 388 s at 8192)")
        run.add_argument("--max-attempts", type=whole_number(1, MAX_ATTEMPTS), default=6,
                         metavar="N",
                         help="tries per call on 429/5xx/timeouts, with exponential backoff; "
                              f"1 to {MAX_ATTEMPTS} (default: 6)")
        if own is None:
            run.add_argument("--eval-attempts", type=whole_number(1, MAX_ATTEMPTS), default=5,
                             metavar="N",
                             help="calls of the model under test per sample while its reply "
                                  "is not the protocol's format (proactiveagent: not its "
                                  "JSON, or cut off at the token limit), before the sample "
                                  f"is recorded as failed; 1 to {MAX_ATTEMPTS} (default: 5, "
                                  "upstream's)")
        run.add_argument("--retry-delay", type=number_up_to(MAX_RETRY_DELAY_S), default=1.0,
                         metavar="SECONDS",
                         help="first backoff delay, 0 to 60, doubled on each retry up to 60 s, "
                              "with jitter; a Retry-After header wins when longer (default: 1)")
        run.add_argument("--down-after", type=positive_float, default=60.0, metavar="SECONDS",
                         help="declare the endpoint down and stop after this long (above 0) "
                              "without a "
                              "successful call while calls keep failing; 429s (rate limiting) "
                              "never count (default: 60)")
        run.add_argument("--refresh", choices=("responses", "judgments", "all"),
                         help="ask again instead of reusing cached answers of that stage (a "
                              "model or judge that changed behind the same name)")
        run.add_argument("--min-coverage", type=fraction, metavar="FRACTION",
                         help="exit with status 1 when fewer than this share of the triggers "
                              "is scored (0 to 1, e.g. 0.95 or 95%%); default: when any trigger was lost to a "
                              "failed call")
        run.add_argument("--rpm", type=positive_float, metavar="N",
                         help="at most N (above 0) requests per minute per role, shared by "
                              "every run using the same store (default: no limit)")
        run.add_argument("--tpm", type=positive_float, metavar="N",
                         help="at most N (above 0) tokens (prompt + completion) per minute "
                              "per role, "
                              "shared likewise; paced on estimates, corrected by actual usage")
        if own is None:
            add_batch_options(run)
        run.add_argument("--dry-run", action="store_true",
                         help="validate, check access and print the plan; make no call")
        if name != "status":
            run.add_argument("--temporary-prefect-server", action="store_true",
                             help="report the run to a Prefect server of this command's own, "
                                  "started for it and stopped after it (its UI off; its runs "
                                  "kept in PREFECT_HOME's database, which 'prefect server "
                                  "start' shows later). Without it and without PREFECT_API_URL "
                                  "the run reports to no Prefect server: the stages' progress "
                                  "goes to standard error, their tables and the run record to "
                                  "the store")
        if name == "run":
            run.add_argument("--label", metavar="NAME",
                             help="also record the run as a night of the series NAME, beside "
                                  "the sweeps' ('proactflow history --series NAME')")
        if name == "rejudge":
            judge.add_argument("--all-models", action="store_true",
                               help="instead of --eval-model: re-judge the stored responses of "
                                    "every complete evaluation in the store (runs and imports "
                                    "alike; narrowed by --limit/--phases and the options "
                                    "below), after printing the plan; --dry-run stops there")
            add_selection_options(sub)
            judge.add_argument("--judges", type=judge_list, metavar="A,B,...",
                               help="re-judge with each of these judges in turn (same "
                                    "--judge-* options for all), then report their agreement: "
                                    "percent agreement, Cohen's kappa, quadratic-weighted kappa, "
                                    "confusion matrices and the disagreeing triggers")
        sub.set_defaults(handler=rejudge_command if name == "rejudge" else run_command)
