"""What every layer may use: errors a user can fix, keeping secrets out of what is written,
whether a host is reachable, seconds a user sets in the environment (environment.py), the
garbage collector's settings and the freed heap given back (heap.py), giving back what a
cancelled round trip obtained (cancellation.py), and the PostgreSQL connection that hosts
sharing a database use (postgres.py) with its tables (postgres_schema.py) and what its errors
mean (postgres_errors.py).

Imports nothing of proactflow: everything else may import it.
"""
