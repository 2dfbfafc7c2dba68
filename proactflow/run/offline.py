"""Checks that tell "no network" apart first thing, before the seconds of imports a run needs.

Offline, a first run used to spend 23 s in the hub client's retries, or a minute in litellm's,
before saying anything. These checks use only the command line and the environment: the hub
(unless the corpus is a local file or already in the hub cache), the upstream judge prompt
(unless given or already in the store) and each provider model's host (roles with their own
--*-api-base are checked against that endpoint later, where a refusal is named).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

from ..common.errors import UserError
from ..common.network import unreachable
from ..config.endpoints import provider_url
from ..config.settings import DEFAULT_SUITE, PAPER_JUDGE, CorpusSource, default_store


def check_network(args: argparse.Namespace,
                  option_checks: Callable[[], Any] | None = None) -> None:
    """A one-line UserError when something the command needs from the network is out of reach.
    `option_checks` is called before saying that the judge's host is out of reach: an option
    error (a judge the suite does not take) is the one to report."""
    from ..cache.artifacts import ArtifactStore
    from ..suites.sources import fetch_upstream_judge_prompt, locate_corpus

    proactbench = getattr(args, "suite", DEFAULT_SUITE) == DEFAULT_SUITE
    if proactbench and not args.corpus:
        locate_corpus(CorpusSource(revision=args.revision))  # the hub, or its local cache
    if proactbench and not args.judge_prompt:
        fetch_upstream_judge_prompt(ArtifactStore(args.store or default_store()))
    roles = (["eval"] if args.command == "run" else []) + \
        (["judge"] if args.command != "status" else [])
    for prefix in roles:
        model = getattr(args, f"{prefix}_model") or \
            (PAPER_JUDGE if prefix == "judge" and proactbench else None)
        if not model or getattr(args, f"{prefix}_api_base"):
            continue
        url = provider_url(model)
        problem = unreachable(url) if url else None
        if problem:
            if prefix == "judge" and option_checks is not None:
                option_checks()
            label = "model under test" if prefix == "eval" else "judge"
            raise UserError(f"{label} {model}: cannot reach {url} (no network? {problem})")
