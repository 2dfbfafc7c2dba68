"""The content-addressed artifact store (with a night's view of it: pinned.py) and the per-call
response cache."""
