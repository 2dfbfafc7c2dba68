"""Reading results, in rooms by concept: what a store's evaluations are and their identity
(here: the one evaluation type, evaluation.py, of every suite, read by evaluations.py for the
suite read with its triggers and by suite_evaluations.py for the others), the viewer (viewer/), the report (report/), the
sweeps' history of nights (history/) and the store's upkeep: imports, re-judging many, gc
(upkeep/). Each room's `__init__` says what it owns; bottom first, a room imports only those
before it in that list.

May import: common, prefect_server, schemas, cache, limits, config, providers, suites, stages,
run, flows.evaluate.
"""
