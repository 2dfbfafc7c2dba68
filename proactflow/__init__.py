"""proactflow: how proactive LLMs are, measured on the field's benchmarks (each a suite:
ProactBench, Proactive Agent's ProactiveBench, the multimodal and the video ProactiveBench, or
one of your own), as Prefect flows over cached,
content-addressed Parquet stages.

A run fetches a suite's samples, asks the model under test, has a judge (or a check) score each
reply and aggregates the scores. Each stage writes an artifact keyed by everything that changes
its output and every LLM call goes through a per-call cache, so a repeated, resumed or
re-judged run pays only for what is new. The subpackages are grouped by concept, each one's
docstring saying what it owns and what it may import (docs/layout.md has the map).

Importing it changes nothing outside proactflow (no environment variable, no collector
setting, no patch of litellm): the `proactflow` command and the other entries of its processes
set their process up (common/process.py, providers/litellm_setup.py).
"""

__version__ = "0.1.0"
