"""Running an evaluation: checks made before the first paid call and the plan (preflight.py,
over access.py and plan.py; offline.py), stage materialisation for every suite (pipeline.py),
what a run says while it runs (progress.py), and what it leaves behind: provenance, usage and
cost (records.py) and its run record (run_records.py).

May import: common, schemas, cache, limits, config, providers, suites, stages.
"""
