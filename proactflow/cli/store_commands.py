"""Commands over the store: `import`, `report`, `runs`, `gc`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..common.errors import UserError
from ..config.settings import default_store
from .options import selected_evaluations


def import_command(args: argparse.Namespace) -> int:
    from ..cache.artifacts import ArtifactStore
    from ..results.upkeep.imports import import_published

    if args.model and len(args.files) > 1:
        raise UserError("--model names one file's model: import the files one at a time")
    store = ArtifactStore(args.store or default_store())
    for source in args.files:
        for line in import_published(args.suite, source, store, corpus=args.corpus,
                                     judge=args.judge_model, model=args.model):
            print(line)
    return 0


def report_command(args: argparse.Namespace) -> int:
    from ..cache.artifacts import ArtifactStore
    from ..results.report.pages import write_report
    from ..results.suite_evaluations import suite_evaluations

    store = ArtifactStore(args.store or default_store())
    selection = bool(args.run or args.select_models or args.corpus_revision)
    others = [] if args.corpus_revision else suite_evaluations(
        store, runs=args.run, models=args.select_models,
        include_incomplete=args.include_incomplete)
    done = write_report(store, Path(args.out), samples=args.bootstrap, seed=args.seed,
                        evaluations=selected_evaluations(args, store) + others,
                        published=Path(args.published) if args.published else None,
                        include_incomplete=args.include_incomplete, selected=selection)
    for line in done["coverage"]:
        print(line)
    for line in done.get("left_out", []):
        print(f"left out as incomplete (re-run to retry, or --include-incomplete): {line}")
    for path in done["paths"].values():
        print(f"wrote {path}")
    return 0


def runs_ls_command(args: argparse.Namespace) -> int:
    from ..cache.artifacts import ArtifactStore
    from ..run.run_records import listing_lines, read_records

    store = ArtifactStore(args.store or default_store())
    for line in listing_lines(read_records(store), store):
        print(line)
    return 0


def runs_show_command(args: argparse.Namespace) -> int:
    from ..cache.artifacts import ArtifactStore
    from ..run.run_records import find_record, read_records

    store = ArtifactStore(args.store or default_store())
    record = find_record(read_records(store), args.run, store)
    print(json.dumps(record.content, indent=2, ensure_ascii=False))
    return 0


def runs_rm_command(args: argparse.Namespace) -> int:
    from ..cache.artifacts import ArtifactStore
    from ..run.run_records import find_record, read_records

    store = ArtifactStore(args.store or default_store())
    records = read_records(store)
    chosen = [find_record(records, wanted, store) for wanted in args.runs]  # all found, or none
    for record in {r.name: r for r in chosen}.values():
        store.remove_record(record.name)
        print(f"removed run {record.name} ({record.model} judged by {record.judge}); its "
              "artifacts stay until 'proactflow gc'")
    return 0


def gc_command(args: argparse.Namespace) -> int:
    from ..cache.artifacts import ArtifactStore
    from ..results.upkeep.gc import collect, plan_collection, summary_lines

    store = ArtifactStore(args.store or default_store())
    collection = plan_collection(store, keep_latest=args.keep_latest, older_than=args.older_than,
                                 keep_history=not args.forget_history)
    if not args.dry_run:
        collect(store, collection)
    for line in summary_lines(collection, args.dry_run):
        print(line)
    return 0


def view_command(args: argparse.Namespace) -> int:
    import webbrowser

    from ..cache.artifacts import ArtifactStore
    from ..results.suite_evaluations import suite_evaluations
    from ..results.viewer.site import frame_summary, write_viewer

    store = ArtifactStore(args.store or default_store())
    evaluations = selected_evaluations(args, store)
    others = [] if args.corpus_revision else suite_evaluations(
        store, runs=args.run, models=args.select_models,
        include_incomplete=args.include_incomplete)
    if not evaluations and not others:
        raise UserError(f"no evaluations in {store.url} for this selection: run 'proactflow "
                        "run' or 'proactflow import' first (--include-incomplete shows runs "
                        "whose calls partly failed)")
    page = write_viewer(evaluations + others, Path(args.out), store)
    print(f"wrote {page} ({frame_summary(evaluations + others)})")
    if not args.include_incomplete and not args.corpus_revision:
        left_out = len(suite_evaluations(store, runs=args.run, models=args.select_models,
                                         include_incomplete=True)) - len(others)
        if left_out:
            print(f"{left_out} incomplete evaluations of other suites not shown (some calls "
                  "failed): --include-incomplete shows them")
    if not args.no_open and not webbrowser.open(page.resolve().as_uri()):
        print("no browser found here: open that file in one")
    return 0
