"""A sweep's history of nights: the nights and their files (nights.py), what a night file must
hold (checks.py), scores, intervals and findings across nights (scores.py, bootstrap.py), the
history page (page.py), each night's own pages in a sweep's `out` (night_pages.py) and each
finding's side-by-side page (compare.py).

May import: the layers below results, results' evaluation.py, evaluations.py and
suite_evaluations.py, the viewer and the report.
"""
