"""The command line: every command, option and help text in one place."""

from __future__ import annotations

import argparse

from ..config.settings import DEFAULT_SUITE, PAPER_JUDGE
from ..suites.proactiveagent.calibration_names import CALIBRATION, LABELLED
from .options import (EPILOG, Parser, add_batch_options, add_database_option,
                      add_role_options, add_selection_options, add_store_option, age, fraction,
                      judge_list, non_negative_float, phases_list, positive_float, positive_int,
                      prompt_file)
from .batch_commands import add_batches_command
from .history_command import add_history_command
from .rejudging import rejudge_command
from .running import run_command
from .store_commands import (gc_command, import_command, report_command, runs_ls_command,
                             runs_rm_command, runs_show_command, view_command)
from .sweeping import serve_command, sweep_command


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="proactflow",
        description="Measure how proactive an LLM is, on one of four benchmark suites: "
                    "ProactBench (default: regenerate the assistant reply at each trigger point "
                    "of the corpus, have a judge score it against the trigger's rubric, report "
                    "PASS/PARTIAL/FAIL rates per phase); Proactive Agent's ProactiveBench "
                    "(--suite proactiveagent: the model proposes a task or none at each event of "
                    "a trace, a reward model accepts or rejects it, F1 per split); the "
                    "multimodal ProactiveBench (--suite proactivebench-mllm: an image model may "
                    "ask to move an occluder, rotate, deblur... before it names the category, "
                    "acc and proactive steps per dataset); the video ProactiveBench (--suite "
                    "proactivebench-video: a video model watches second by second and answers "
                    "when it should, PAUC per part). Every stage is a cached Parquet artifact, "
                    "run as a Prefect flow.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    specs = {
        "run": "generate responses, judge them and score each group (ProactBench: phase; "
               "Proactive Agent: split; multimodal: dataset; video: part)",
        "rejudge": "judge cached responses again (new judge or prompt): no generation calls",
        "status": "show what the store holds for these settings: calls cached, failed and "
                  "still to make, and each stage's artifact; makes no call",
        "calibrate": "score a candidate judge against ProactiveBench's human-labelled reward "
                     "test set (the authors' reward-model table: agreement per category, "
                     "accuracy, precision, recall, F1), cached like a run",
    }
    for name, summary in specs.items():
        sub = commands.add_parser(name, help=summary, description=summary + ".",
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog=EPILOG)
        if name == "calibrate":
            # The "model under test" is the labelled test set: its proposals are the data.
            sub.set_defaults(suite=CALIBRATION, eval_model=LABELLED, eval_api_base=None,
                             eval_api_key_env=None)
        else:
            sub.add_argument("--suite", default=DEFAULT_SUITE, metavar="NAME",
                             help="the benchmark: proactbench (default; ProactBench, Boson AI), "
                                  "proactiveagent (Proactive Agent's ProactiveBench, THUNLP), "
                                  "proactivebench-mllm (the multimodal ProactiveBench) or "
                                  "proactivebench-video (the video ProactiveBench, PAUC)")
            add_role_options(sub, "eval", "model under test", required=name != "rejudge",
                             default_model=None)
        add_role_options(sub, "judge", "judge", required=False,
                         default_model=f"{PAPER_JUDGE} for proactbench; proactiveagent needs one")
        judge = sub.add_argument_group("judge prompt")
        judge.add_argument("--judge-prompt", metavar="FILE",
                           help="judge system prompt file (default: the upstream prompt, "
                                "downloaded once at its pinned commit and cached in the store)")
        judge.add_argument("--prompt", type=prompt_file, action="append", metavar="NAME=FILE",
                           help="another of the suite's prompts from a file of yours "
                                "(proactiveagent: agent_instruction, judge_instruction; the "
                                "system prompts have --eval-system-prompt-file and "
                                "--judge-prompt); repeatable")
        judge.add_argument("--judge-attempts", type=positive_int, metavar="N",
                           help="judge calls per response while its reply is not a valid "
                                "verdict (malformed JSON, unknown score), before it becomes a "
                                "judge_error row (default: 4; proactiveagent: 10, upstream's)")
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
                            if name != "calibrate" else
                            "a reward test file in the benchmark's JSON-lines shape (default: "
                            "dataset/reward_data/test_data.jsonl at the pinned upstream commit)")
        corpus.add_argument("--revision", metavar="REV",
                            help="hub revision (commit sha, tag, branch) to pin; the commit "
                                 "actually used is recorded either way")
        corpus.add_argument("--limit", type=positive_int, metavar="N",
                            help="evaluate only the first N dialogues (proactiveagent: traces, "
                                 "in name order; proactivebench-mllm: samples of each dataset; "
                                 "proactivebench-video: samples of each part)")
        corpus.add_argument("--samples", type=positive_int, default=1, metavar="K",
                            help="draw K responses per trigger and judge each (default: 1); "
                                 "with K > 1, --out adds trigger_scores.csv with each trigger's "
                                 "mean score and its variance across samples")
        corpus.add_argument("--phases", type=phases_list, metavar="LIST",
                            default=("EMERGENT", "CRITICAL", "RECOVERY"),
                            help="comma-separated phases to evaluate (default: all three)")
        corpus.add_argument("--parts", metavar="LIST",
                            help="proactivebench-video: comma-separated parts to evaluate "
                                 "(WEB,EGO,TV,VAD; default: all four)")
        corpus.add_argument("--skip-undecodable-videos", dest="skip_undecodable",
                            action="store_true",
                            help="proactivebench-video: run the rest when a video cannot be "
                                 "decoded (its turns are error rows, counted apart as "
                                 "'undecodable video'); without it such a video is a one-line "
                                 "error naming the file, before any call")
        mllm = sub.add_argument_group("multimodal ProactiveBench (--suite proactivebench-mllm)")
        mllm.add_argument("--datasets", metavar="LIST",
                          help="comma-separated datasets by short or full name: ROD, VSOD, "
                               "MVP-N, IN-C, QD, CIT, COCO (default: all seven)")
        mllm.add_argument("--mode", choices=("mcqa", "oeg"),
                          help="mcqa (default): multiple choice, step by step; oeg: the first "
                               "view answered freely, scored by --judge-model")
        mllm.add_argument("--hint", action="store_true",
                          help="append each dataset's hint to the question")
        mllm.add_argument("--reference", action="store_true",
                          help="the unoccluded reference image, categories only, one step")
        mllm.add_argument("--package", metavar="FILE",
                          help="a copy of the proactivebench 0.1.1 wheel (offline; default: "
                               "fetched once with pip and cached in the store)")
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
        run.add_argument("--concurrency", type=positive_int, default=16, metavar="N",
                         help="calls in flight per role's model, together with every other "
                              "run calling that model on this store's host or database "
                              "(default: 16)")
        run.add_argument("--timeout", type=positive_float, metavar="SECONDS",
                         help="per-call timeout; a call that times out is not retried, the "
                              "provider may have billed it (default: 60 s + 40 ms per max "
                              "token: 388 s at 8192)")
        run.add_argument("--max-attempts", type=positive_int, default=6, metavar="N",
                         help="tries per call on 429/5xx/timeouts, with exponential backoff "
                              "(default: 6)")
        if name != "calibrate":
            run.add_argument("--eval-attempts", type=positive_int, default=5, metavar="N",
                               help="calls of the model under test per sample while its reply "
                                    "is not the protocol's format (proactiveagent: not its "
                                    "JSON, or cut off at the token limit), before the sample "
                                    "is recorded as failed (default: 5, upstream's)")
        run.add_argument("--retry-delay", type=non_negative_float, default=1.0,
                         metavar="SECONDS",
                         help="first backoff delay, doubled on each retry up to 60 s, with "
                              "jitter; a Retry-After header wins when longer (default: 1)")
        run.add_argument("--down-after", type=positive_float, default=60.0, metavar="SECONDS",
                         help="declare the endpoint down and stop after this long without a "
                              "successful call while calls keep failing; 429s (rate limiting) "
                              "never count (default: 60)")
        run.add_argument("--refresh", choices=("responses", "judgments", "all"),
                         help="ask again instead of reusing cached answers of that stage (a "
                              "model or judge that changed behind the same name)")
        run.add_argument("--min-coverage", type=fraction, metavar="FRACTION",
                         help="exit with status 1 when fewer than this share of the triggers "
                              "is scored (e.g. 0.95); default: when any trigger was lost to a "
                              "failed call")
        run.add_argument("--rpm", type=positive_float, metavar="N",
                         help="at most N requests per minute per role, shared by every run "
                              "using the same store (default: no limit)")
        run.add_argument("--tpm", type=positive_float, metavar="N",
                         help="at most N tokens (prompt + completion) per minute per role, "
                              "shared likewise; paced on estimates, corrected by actual usage")
        if name != "calibrate":
            add_batch_options(run)
        run.add_argument("--dry-run", action="store_true",
                         help="validate, check access and print the plan; make no call")
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

    imports = commands.add_parser(
        "import", help="store published per-dialogue results files as responses + judgments",
        description="Store upstream per-dialogue results files (*_results.jsonl, as released "
                    "for the published models) as responses and judgments, labelled with their "
                    "model and judge, so they can be reported, compared or re-judged without "
                    "paying for generation. Triggers of the corpus missing from a file are "
                    "recorded as generation errors. With --suite proactiveagent, each DIR is "
                    "one model's published traces (traces_new/<model>/, from upstream's "
                    "eval/traces.zip), stored as that model's responses (revision label "
                    "published-traces) for 'rejudge' to score; events and traces that do not "
                    "match the test data are counted and listed.")
    imports.add_argument("files", nargs="+", metavar="FILE",
                         help="results files to import (proactiveagent: trace folders, DIR)")
    imports.add_argument("--suite", default=DEFAULT_SUITE, choices=(DEFAULT_SUITE,
                                                                    "proactiveagent"),
                         help="whose published results: proactbench (default) or "
                              "proactiveagent")
    imports.add_argument("--corpus", metavar="PATH",
                         help="the corpus the results were produced on (proactbench: "
                              "final_dialogues.jsonl, required; proactiveagent: the test-data "
                              "folder, default the pinned upstream commit)")
    add_store_option(imports)
    imports.add_argument("--judge-model", default=PAPER_JUDGE, metavar="NAME",
                         help=f"the judge that labelled the files (default: {PAPER_JUDGE})")
    imports.add_argument("--model", metavar="NAME",
                         help="model name to record (default: the file's evaluated_model, or "
                              "its file name when that is a placeholder; proactiveagent: the "
                              "folder's name); one FILE only")
    imports.set_defaults(handler=import_command)

    report = commands.add_parser(
        "report", help="leaderboard with confidence intervals, metrics and an HTML report",
        description="Build a leaderboard over every evaluation in the store, of every suite "
                    "found there: per suite a model x group table (ProactBench phases, Proactive "
                    "Agent splits, multimodal datasets per variant, video parts) with 95 % "
                    "bootstrap intervals and rank ranges, a chart, the full tables behind a "
                    "toggle, incomplete evaluations listed with what they miss; ProactBench's "
                    "upstream-shaped metrics per evaluation; a self-contained report.html and "
                    "the per-sample viewer in viewer/.")
    add_store_option(report)
    report.add_argument("--out", required=True, metavar="DIR",
                        help="writes report.html, viewer/, ProactBench's leaderboard.csv/"
                             ".parquet and metrics/<model>__<judge>.json, and each other "
                             "suite's <suite>_leaderboard.csv here")
    report.add_argument("--bootstrap", type=positive_int, default=1000, metavar="N",
                        help="bootstrap resamples (default: 1000)")
    report.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    report.add_argument("--published", metavar="DIR",
                        help="ProactiveBench: a folder of the authors' per-model results files "
                             "(<model>.csv) to show beside measured rows (default: those of the "
                             "pinned upstream commit, downloaded once and cached)")
    add_selection_options(report)
    report.set_defaults(handler=report_command)

    sweep = commands.add_parser(
        "sweep", help="evaluate many models from a TOML file, then build a leaderboard",
        description="Evaluate every model of a sweep file with every judge (each an 'evaluate' "
                    "subflow, all at once), then write a leaderboard. A model that fails does "
                    "not stop the others. Exit status 1 when any failed. Larger sweeps spread "
                    "their pairs over processes of this machine, sharing every model's limits. "
                    "See docs/sweeps.md for the file format.")
    sweep.add_argument("--config", required=True, metavar="FILE", help="the sweep TOML file")
    sweep.add_argument("--processes", type=positive_int, metavar="N",
                       help="spread the pairs over N processes of this machine (overrides the "
                            "file's 'processes'; default: one per 4 pairs, at most one per "
                            "core; 1 keeps them all in this process)")
    sweep.add_argument("--fail-on-regression", action="store_true",
                       help="exit with status 1 when a score fell since the night before beyond "
                            "noise (its paired interval excludes 0) and beyond the file's "
                            "regression_threshold")
    sweep.add_argument("--refresh-on-change", action="store_true",
                       help="ask a model (or judge) again when the model serving its name "
                            "changed since its cached results (as refresh_on_change = true)")
    add_batch_options(sweep)
    add_database_option(sweep)
    sweep.set_defaults(handler=sweep_command)
    add_history_command(commands)

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
    serve.set_defaults(handler=serve_command)
    view = commands.add_parser(
        "view", help="open the per-sample viewer of every suite: what each model saw, said "
                     "and scored",
        description="Write a viewer of the store's evaluations, of every suite found there (a "
                    "folder: index.html, one data file per sample loaded when opened, and the "
                    "images the models saw under media/; no server needed) and open it in a "
                    "browser. ProactBench: a trigger's context, rubric, each response with the "
                    "judge's evidence highlighted, verdict and rationale. Proactive Agent: a "
                    "trace's events with each proposal, the reward model's verdict, the gold "
                    "label and TP/FP/TN/FN. Multimodal: an episode's steps with the exact image "
                    "shown, options, reply, readings and stop reason. Video: a timeline of "
                    "frames, subtitles and replies, the gold turns' windows, judge scores and "
                    "PAUC. Filter by suite, model, judge and the suite's groups and outcomes; "
                    "tick two models to see them side by side; the address names the open "
                    "sample and filters. 'proactflow report' writes one too.")
    add_store_option(view)
    view.add_argument("--out", default="proactflow-viewer", metavar="DIR",
                      help="folder to write the viewer to (default: ./proactflow-viewer)")
    view.add_argument("--no-open", action="store_true", help="write it, open no browser")
    add_selection_options(view)
    view.set_defaults(handler=view_command)
    _add_store_admin_commands(commands)
    add_batches_command(commands)
    return parser


def _add_store_admin_commands(commands) -> None:
    runs = commands.add_parser(
        "runs", help="list, show or remove the run records of the store",
        description="Every run, rejudging and import leaves a record in <store>/runs/ naming "
                    "its settings, numbers and artifacts. Removing a record keeps its artifacts "
                    "until 'proactflow gc' finds no other record needing them.")
    actions = runs.add_subparsers(dest="runs_action", required=True, metavar="ACTION")
    listing = actions.add_parser("ls", help="one line per run, newest first",
                                 description="One line per run record, newest first: its name "
                                             "(usable wherever a run id is asked for), flow, "
                                             "whether it completed, model and judge.")
    add_store_option(listing)
    listing.set_defaults(handler=runs_ls_command)
    show = actions.add_parser("show", help="print one run record",
                              description="Print one run record (JSON).")
    show.add_argument("run", metavar="ID", help="a prefix of the run's id or record name")
    add_store_option(show)
    show.set_defaults(handler=runs_show_command)
    remove = actions.add_parser("rm", help="remove run records (their artifacts stay until gc)",
                                description="Remove run records. Artifacts stay until 'proactflow "
                                            "gc', which keeps those another record needs.")
    remove.add_argument("runs", nargs="+", metavar="ID",
                        help="prefixes of run ids or record names")
    add_store_option(remove)
    remove.set_defaults(handler=runs_rm_command)

    gc = commands.add_parser(
        "gc", help="remove old run records and the artifacts no kept run needs",
        description="Remove the run records beyond the newest N of each model/judge pair "
                    "and/or older than AGE (both given: a record goes when it is beyond the "
                    "newest N and older than AGE), then every artifact that no kept record "
                    "needs, following each artifact's inputs. Artifacts written or reused in "
                    "the last 24 hours always stay (a run in progress writes its record at its "
                    "end). The per-call cache is not touched.",
        epilog="examples:\n  proactflow gc --keep-latest 7 --dry-run\n"
               "  proactflow gc --keep-latest 3 --older-than 30d",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    gc.add_argument("--keep-latest", type=positive_int, metavar="N",
                    help="keep the newest N runs of each model under test and judge")
    gc.add_argument("--older-than", type=age, metavar="AGE",
                    help="remove only runs started longer ago than AGE: 90m, 12h, 30d, 2w")
    gc.add_argument("--dry-run", action="store_true", help="print what would go; remove nothing")
    gc.add_argument("--forget-history", action="store_true",
                    help="do not keep the artifacts the sweeps' history names (its scores stay: "
                         "they need none; its links to each night's viewer then may not)")
    add_store_option(gc)
    gc.set_defaults(handler=gc_command)
