"""The report: its pages and exports (pages.py), a sweep's report (sweeps.py) and the HTML they
are made of (html.py).

May import: the layers below results, results' evaluation.py, evaluations.py and
suite_evaluations.py, and the viewer (a report links each evaluation's viewer).
"""
