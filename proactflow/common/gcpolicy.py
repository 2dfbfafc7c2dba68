"""Python's cyclic garbage collector, set for a process that holds a large heap (Prefect,
litellm, pydantic schemas, a suite's data) and makes hundreds of LLM calls.

With CPython's default thresholds (700, 10, 10) a cold 624-trigger `proactflow run` made about
2,000 collections, a dozen of them full ones that each walked the whole heap (30 to 300 ms apiece,
growing with it, most while Prefect and litellm were being imported): 2.1 to 2.6 s of CPU, a fifth
of the process's. Each call allocates many short-lived containers (litellm's logging
object, the OpenAI client's request, pydantic models), so the youngest generation filled every
few calls. Collecting it every 10,000 net allocations instead of 700 lets most of those objects
die by reference counting first, and full collections become rare (CPython still runs one only
when a quarter of the old heap is new): measured 0.8 to 1.1 s in about 130 collections for the
same run, a third of it the one full collection before the run starts (`freeze_start_up_heap`),
and the same peak memory. What remains is mostly the cyclic garbage each call leaves (about 37 objects:
the HTTP client's request and response objects, which refer to each other).
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 10, 10)


def freeze_start_up_heap() -> None:
    """Before a run's calls: everything alive now (imported modules, mostly) lives as long as
    the process, so move it out of the collector's sight (`gc.freeze`); collections then walk
    only what the run itself made. A sweep's processes without it: about 4 s of collections
    each in the 16-model benchmark, single pauses of 100 ms and more with the loop stopped."""
    gc.collect()
    gc.freeze()


def tune() -> None:
    """Collect less often (see the module's docstring); never more often than now."""
    current = gc.get_threshold()
    if current[0] < THRESHOLDS[0]:
        gc.set_threshold(*THRESHOLDS)

