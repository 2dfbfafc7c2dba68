"""`proactflow batches ls|cancel`: the batches of a store (run --batch), and stopping them."""

from __future__ import annotations

import argparse
import asyncio

from ..common.errors import UserError
from ..config.settings import default_store
from .options import add_database_option, add_store_option, database_from_args


def add_batches_command(commands) -> None:
    batches = commands.add_parser(
        "batches", help="list or cancel the provider batches of --batch runs",
        description="Every batch a --batch run submits is recorded in the store (in the "
                    "database with --database) before the provider creates it: its provider, "
                    "endpoint, id, requests and state. A run started again waits for the "
                    "batches still running instead of paying twice; these commands show them "
                    "and stop the ones you no longer want (their finished lines are kept, the "
                    "rest are asked again by the next run).")
    actions = batches.add_subparsers(dest="batches_action", required=True, metavar="ACTION")
    listing = actions.add_parser("ls", help="one line per batch, oldest first",
                                 description="One line per batch: id, state, lines done of "
                                             "its total, model, endpoint and age.")
    listing.add_argument("--pending", action="store_true",
                         help="only the batches still running at their provider")
    cancel = actions.add_parser(
        "cancel", help="cancel batches still running at their provider",
        description="Ask the provider to cancel batches, with the key of the run that made "
                    "them (its api_key_env, else the provider's usual variable). Lines they "
                    "finished are still read by the next run; the others are asked again.")
    cancel.add_argument("ids", nargs="*", metavar="ID", help="batch ids (see 'batches ls')")
    cancel.add_argument("--all", action="store_true", help="every batch still running")
    for action, handler in ((listing, batches_ls_command), (cancel, batches_cancel_command)):
        add_store_option(action)
        add_database_option(action)
        action.set_defaults(handler=handler)


def _registry(args: argparse.Namespace):
    from ..batches.roles import open_registry
    from ..cache.artifacts import ArtifactStore

    store = ArtifactStore(args.store or default_store())
    return open_registry(store.local_dir("batches"), database_from_args(args))


def batches_ls_command(args: argparse.Namespace) -> int:
    from ..batches.listing import batch_line
    from ..batches.settle import refresh_all

    registry = _registry(args)
    # Live batches as their providers say now: a cancel or an end since the last run shows.
    records, problems = asyncio.run(refresh_all(asyncio.run(registry.records()), registry))
    shown = [record for record in records if record.live or not args.pending]
    for record in shown:
        print(batch_line(record))
    if not shown:
        print("no batches" + (" pending" if args.pending else ""))
    for problem in problems:
        print(problem)
    return 0


def batches_cancel_command(args: argparse.Namespace) -> int:
    from ..batches import settle

    if not args.ids and not args.all:
        raise UserError("name the batches to cancel (ids from 'proactflow batches ls') or "
                        "give --all")
    registry = _registry(args)
    live = [record for record in asyncio.run(registry.records()) if record.live]
    chosen = live if args.all else [r for r in live if r.batch_id in args.ids]
    unknown = set(args.ids) - {record.batch_id for record in live}
    if unknown:
        raise UserError(f"no pending batch {', '.join(sorted(unknown))} in this store "
                        "('proactflow batches ls --pending' lists them)")

    async def cancel_all() -> list[str]:
        return [await settle.cancel(record, registry) for record in chosen]

    lines = asyncio.run(cancel_all())
    for line in lines:
        print(line)
    # What could not be done is said above; exit 1 so a script sees it.
    return 1 if any(line.startswith("cannot cancel") for line in lines) else 0
