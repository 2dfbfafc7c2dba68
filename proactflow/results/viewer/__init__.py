"""The per-trigger viewer: the site a store's evaluations are browsed in (site.py writes it), its
page (page.py) and the scripts of its list and of a trigger's detail (script.py,
detail_script.py).

May import: the layers below results, and results' own evaluation.py, evaluations.py and
suite_evaluations.py.
"""
