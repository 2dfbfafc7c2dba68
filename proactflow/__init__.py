"""proactflow: ProactBench proactivity evaluation as a Prefect flow over cached Parquet stages."""

import os as _os

# litellm fetches a model price map over the network at import unless told to use its bundled copy.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Before the heavy imports (Prefect, litellm): collect garbage less often (gcpolicy.py).
from .common import gcpolicy as _gcpolicy  # noqa: E402

_gcpolicy.tune()

__version__ = "0.1.0"
