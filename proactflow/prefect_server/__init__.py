"""The Prefect API a command's flows report to: the server PREFECT_API_URL names, else a
temporary one of the command's own (api.py) running Prefect's app with its SQLite writes
serialised (app.py).

May import: common.
"""
