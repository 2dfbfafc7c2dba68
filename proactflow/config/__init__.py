"""What a run is asked to do: its settings (settings.py) and named roles (roles.py), each role's
generation settings (generation.py), how they conform to litellm's model map (effective.py), and which
endpoint a role's calls really reach (endpoints.py).

May import: common, cache, limits (a model's limits are part of its settings); and, inside a
function, suites (a role's default generation settings are its suite's protocol's:
tests/test_layering.py lists this one upward import).
"""
