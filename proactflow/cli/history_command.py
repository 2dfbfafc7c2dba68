"""`proactflow history`: each (model, judge) score per night, with the changes that are real."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.errors import UserError
from ..config.settings import default_store
from .options import add_store_option

if TYPE_CHECKING:
    import polars as pl


def _date(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date such as 2026-11-01, got {text!r}") \
            from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def add_history_command(commands: argparse._SubParsersAction) -> None:
    history = commands.add_parser(
        "history", help="each model's score per night, and the regressions that are real",
        description="Read the nights the sweeps recorded in the store (each sweep is one night "
                    "of its series: the sweep file's 'name'), print each (model or revision, "
                    "judge) score per night with its 95 % interval (each suite's own figure: "
                    "ProactBench's weighted score, Proactive Agent's F1, the multimodal acc or "
                    "agg, the video PAUC), the regressions and "
                    "improvements between consecutive nights (paired over the samples both "
                    "scored), and write history.csv and history.html (a chart per suite and "
                    "group, intervals as bands, links to each night's report and viewer).",
        epilog="examples:\n  proactflow history --config nightly.toml\n"
               "  proactflow history --store s3://bucket/proactflow --since 2026-11-01",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    where = history.add_mutually_exclusive_group()
    where.add_argument("--config", metavar="FILE",
                       help="a sweep file: its store, its series (name) and suite")
    add_store_option(where)
    history.add_argument("--suite", metavar="S", help="only this suite's nights")
    history.add_argument("--series", metavar="NAME", help="only this series (a sweep's name)")
    history.add_argument("--since", type=_date, metavar="DATE",
                         help="only nights from this date on (e.g. 2026-11-01)")
    history.add_argument("--out", default="proactflow-history", metavar="DIR",
                         help="folder for history.csv, history.html and compare/ (each "
                              "regression's changed samples side by side in the viewer; "
                              "default: ./proactflow-history)")
    history.set_defaults(handler=history_command)


def widest_groups(table: pl.DataFrame) -> pl.DataFrame:
    """Per night and pair, the row of the group with the most samples scored (ProactBench's
    OVERALL, the multimodal and video suites' all, Proactive Agent's split of every trace;
    on a tie the later, where the overall group comes): the line the console prints;
    history.csv has every group."""
    return (table.with_row_index("order")
            .sort("evaluated", "order", descending=True, nulls_last=True)
            .group_by("night", "series", "model", "judge", "variant", maintain_order=True)
            .first().sort("order").drop("order"))


def history_command(args: argparse.Namespace) -> int:
    import polars as pl

    from ..cache.artifacts import ArtifactStore
    from ..results.history.nights import read_nights
    from ..results.history.compare import with_comparisons
    from ..results.history.page import write_history
    from ..results.history.scores import all_findings, history_table

    series, suite, location = args.series, args.suite, args.store
    if args.config:
        from ..sweeps.sweep_file import load_sweep

        config = load_sweep(args.config)
        series, suite = series or config.name, suite or config.suite
        location = config.store
    store = ArtifactStore(location or default_store())
    nights = read_nights(store, series=series, suite=suite, since=args.since)
    if not nights:
        raise UserError(f"no sweep nights recorded in {store.location('history')} for this "
                        "selection: run 'proactflow sweep' first")
    table = history_table(nights)
    findings = with_comparisons(store, Path(args.out), all_findings(nights))
    for night in nights:
        if night.gone:
            print(f"{night.date}  {night.suite or night.series}  night gone: {night.set_aside} "
                  f"({night.location})")
        elif night.set_aside:
            print(f"{night.date}  {night.suite or night.series}  night set aside: "
                  f"{night.set_aside} ({night.location})")
    for row in widest_groups(table.filter(pl.col("set_aside").is_null())).iter_rows(named=True):
        interval = f"[{100 * row['ci_low']:.1f}, {100 * row['ci_high']:.1f}]" \
            if row["ci_low"] is not None else ""
        score = "-" if row["score"] is None else f"{100 * row['score']:.1f}"
        night = row["night"][:16].replace("T", " ")
        variant = f" {row['variant']}" if row["variant"] else ""
        print(f"{night}  {row['suite']}{variant}  {row['point']} ({row['model']}) judged by "
              f"{row['judge']}: {row['metric']} {row['group']} {score} {interval}"
              + ("  [judge changed]" if row["judge_changed"] else ""))
    for finding in findings:
        print(finding.line())
    for path in write_history(Path(args.out), table, findings).values():
        print(f"wrote {path}")
    return 0
