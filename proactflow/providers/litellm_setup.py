"""litellm set up for a process that makes calls: done by the process's entry once its imports
are done and before its first call (the run and sweep commands, `rejudge`, a sweep's process
group, the flows a deployment's worker runs), never on import, so a program that only imports
proactflow keeps litellm as it was."""

from __future__ import annotations

from ..common.gcpolicy import freeze_start_up_heap
from . import litellm_costs

_done: list[bool] = []


def set_up_litellm() -> None:
    """Quiet (no debug banner on errors, no telemetry), and its per-reply pricing and logging
    skipped for the calls of proactflow's edge (litellm_costs.py); once per process."""
    if _done:
        return
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    litellm_costs.install()
    _done.append(True)


def ready_for_calls() -> None:
    """litellm set up, then the start-up heap frozen (gcpolicy.freeze_start_up_heap): what an
    entry does right before its first call."""
    set_up_litellm()
    freeze_start_up_heap()
