"""The store's upkeep: importing published results (imports.py, lending a suite's importer what
it needs of a run; what a file holds is the suite's), re-judging many evaluations
(rejudge_all.py) and removing what no kept run or night needs (gc.py).

May import: the layers below results and every other room of results.
"""
