"""The command line: the top parser, the commands that import, report, view and tend a
store, and the sweep commands; the evaluation commands (run, rejudge, status, calibrate) are
evaluation_commands.py's."""

from __future__ import annotations

import argparse

from ..config.settings import DEFAULT_SUITE, PAPER_JUDGE
from ..suites import command_lines
from ..sweeps import MAX_PROCESSES
from .batch_commands import add_batches_command
from .evaluation_commands import add_evaluation_commands
from .history_command import add_history_command
from .option_types import age, positive_int, whole_number
from .options import (EPILOG, Parser, add_batch_options, add_database_option,
                      add_selection_options, add_store_option)
from .store_commands import (gc_command, import_command, report_command, runs_ls_command,
                             runs_rm_command, runs_show_command, view_command)
from .sweeping import serve_command, sweep_command

MAX_BOOTSTRAP = 1_000_000
"""Resamples of a bootstrap: a million take minutes already; more is a typo."""


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
                    "when it should, PAUC per part). Every stage is a cached Parquet artifact; "
                    "with PREFECT_API_URL set, a run is a Prefect flow on that server.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_evaluation_commands(commands)

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
    imports.add_argument("--suite", default=DEFAULT_SUITE,
                         choices=(DEFAULT_SUITE, *(name for line in command_lines()
                                                   for name in line.imports_published)),
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
    report.add_argument("--bootstrap", type=whole_number(1, MAX_BOOTSTRAP), default=1000,
                        metavar="N",
                        help=f"bootstrap resamples, 1 to {MAX_BOOTSTRAP} (default: 1000)")
    report.add_argument("--seed", type=whole_number(0, 2 ** 32 - 1), default=0, metavar="N",
                        help="bootstrap seed, 0 to 2^32-1 (default: 0)")
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
    sweep.add_argument("--processes", type=whole_number(1, MAX_PROCESSES), metavar="N",
                       help=f"spread the pairs over N (1 to {MAX_PROCESSES}) processes of this "
                            "machine (overrides the "
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
                    "needs, following each artifact's inputs. The artifacts a night of the "
                    "history names (a sweep's or a labelled run's, whatever its suite) stay "
                    "unless --forget-history. Artifacts written or reused in "
                    "the last 24 hours always stay (a run in progress writes its record at its "
                    "end). The per-call cache is not touched.",
        epilog="examples:\n  proactflow gc --keep-latest 7 --dry-run\n"
               "  proactflow gc --keep-latest 3 --older-than 30d",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    gc.add_argument("--keep-latest", type=positive_int, metavar="N",
                    help="keep the newest N (at least 1) runs of each model under test and judge")
    gc.add_argument("--older-than", type=age, metavar="AGE",
                    help="remove only runs started longer ago than AGE: 90m, 12h, 30d, 2w")
    gc.add_argument("--dry-run", action="store_true", help="print what would go; remove nothing")
    gc.add_argument("--forget-history", action="store_true",
                    help="do not keep the artifacts the sweeps' history names (its scores stay: "
                         "they need none; its links to each night's viewer then may not)")
    add_store_option(gc)
    gc.set_defaults(handler=gc_command)
