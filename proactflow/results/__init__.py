"""Reading results: evaluations in a store and their identity (evaluations.py), the report and
its HTML (report.py, report_html.py), the per-trigger viewer (viewer.py, viewer_page.py,
viewer_script.py), re-judging many evaluations (rejudge_all.py), importing published results
(imports.py; ProactiveBench's published traces: published_traces.py), the sweeps' history of
nights with its scores, intervals, regressions, gaps and page (history.py, history_scores.py,
history_bootstrap.py, history_page.py), each night's own pages in a sweep's
`out` (night_pages.py) and each finding's side-by-side page (history_compare.py),
and removing what no kept run needs (store_gc.py).

May import: common, prefect_server, schemas, cache, limits, config, providers, suites, stages,
run, flows.evaluate.
"""
