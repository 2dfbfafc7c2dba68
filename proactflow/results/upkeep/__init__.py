"""The store's upkeep: importing published results (imports.py; ProactiveBench's published
traces: published_traces.py), re-judging many evaluations (rejudge_all.py) and removing what no
kept run or night needs (gc.py).

May import: the layers below results and every other room of results.
"""
