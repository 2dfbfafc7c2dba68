"""The report's style: one self-contained page (inline SVG charts, tables, no script); the
report, each suite's page and the history page share it."""

from __future__ import annotations

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:1180px;
color:#222;padding:0 1rem}h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.8rem;margin:.5rem 0}
th,td{padding:.25rem .5rem;
white-space:nowrap;
border-bottom:1px solid #e5e5e5;text-align:right}
th:nth-child(-n+4),td:nth-child(-n+4){text-align:left}thead th{background:#f6f6f6}
.wrap td{white-space:normal;text-align:left;vertical-align:top;min-width:5rem}
table.pivot td,table.pivot th{text-align:right}table.pivot th:first-child{text-align:left}table.pivot td.name{text-align:left;white-space:normal;
max-width:26rem}table.pivot small{color:#666}tr:target{background:#fff6d6}
details{margin:.5rem 0}summary{cursor:pointer;color:#245;font-size:.9rem}
ul.contents{font-size:.9rem}ul.contents li.h3{margin-left:1.2rem}
ul.incomplete{font-size:.85rem;color:#7d1a1a}
.legend{font-size:.8rem;margin:.3rem 0 0 48px}.key{margin-right:1rem}.key i{display:inline-block;
width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:-1px}.note{color:#666;font-size:.85rem}
"""
