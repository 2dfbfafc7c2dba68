"""Running an evaluation: checks made before the first paid call and the plan (preflight.py,
over access.py, plan.py and plan_counts.py; offline.py), stage materialisation for every suite
(pipeline.py, each stage's key in stage_keys.py, each role's client in role_clients.py), what a
run says while it runs (progress.py), and what it leaves behind: provenance, usage and cost
(records.py) and its run record (run_records.py).

May import: common, schemas, cache, limits, config, providers, suites, stages.
"""
