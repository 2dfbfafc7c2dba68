"""Limits shared across runs, processes and hosts: a model's limits (model_limits.py), the
slots of its calls in flight (inflight.py, slots.py), rate pacing and the adaptive limit
(ratelimit.py), and the leases a client holds on its calls (leases.py); each with a file
backend (a local store) and a PostgreSQL one (a database).

May import: common, cache.
"""
