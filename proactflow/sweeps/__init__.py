"""Sweeps: many models under test and judges from one file (sweep_file.py; an entry of it and
the role it becomes, sweep_entry.py), spread over this machine's processes (process_groups.py,
each child running process_group.py) or over a work pool's workers as deployment runs
(deployed.py); each sweep a night of its series: the snapshot check before it (snapshot.py), its
history entry, findings and events after it (nightly.py).

May import: everything below it but cli and flows.sweep (which drives a sweep).
"""

MAX_PROCESSES = 256
"""Processes one sweep may spread over (`processes`, `--processes`): more is a typo."""
