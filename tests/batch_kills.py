"""A command killed with SIGKILL at a chosen moment of a fake batch API's life: the harness of
the tests that resume batched runs and sweeps (no request may then be submitted twice)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any
import warm_spawn

RUNNER = "import sys; from proactflow.cli import main; sys.exit(main(sys.argv[1:]))"


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (a sweep's process groups run in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def killed_at(fake: Any, event: str, command: list[str], prefect_server: str,
              timeout: float = 180) -> bool:
    """Runs `proactflow *command` in a process of its own, reporting to `prefect_server`, and
    kills it and every process under it (SIGKILL: no cleanup of any kind) when `fake` (a fake
    batch API with an `on_event(name, subject)` hook) is about to do `event`. Whether it was
    killed, rather than ending first."""
    process = warm_spawn.Popen([sys.executable, "-c", RUNNER, *command],
                               env=dict(os.environ, PREFECT_API_URL=prefect_server),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed = threading.Event()

    def kill(name: str, subject: str) -> None:
        if name == event and not killed.is_set():
            for pid in [*descendants(process.pid), process.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
            killed.set()

    fake.on_event = kill
    try:
        process.wait(timeout=timeout)
    finally:
        fake.on_event = None
        if process.poll() is None:
            process.kill()
            process.wait()
    return killed.is_set()
