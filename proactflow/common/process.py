"""What a proactflow process sets up for itself, at its entry (the `proactflow` command, a
sweep's process group, a deployment's flow module), never on import of the package: a user's
own suite imports proactflow into their process, which stays as it was."""

from __future__ import annotations

import os

from . import gcpolicy

COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
"""litellm fetches a model price map over the network at import unless this says to use its
bundled copy: set before litellm is imported."""


def tune_process() -> None:
    """Before the heavy imports (Prefect, litellm): litellm's bundled price map (a value the
    user set stays), and the collector's thresholds (gcpolicy)."""
    os.environ.setdefault(COST_MAP_ENV, "True")
    gcpolicy.tune()
