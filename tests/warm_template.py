"""The warm template (tests/warm_spawn.py): a process that imports the heavy third-party
libraries once, then forks one child per command a test asks for, each child taking the
command's streams, session, folder and environment and running it as `python -m`, `-c` or a
script would. Run as `python warm_template.py SOCKET`; warm_spawn.py starts and asks it."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
from typing import Any

PRELOADED = ("litellm", "openai", "aiohttp", "httpx", "pydantic", "diskcache")
"""What the template imports: the libraries that make a fresh `proactflow` slow to start (litellm
alone is about 5 s of CPU), none of which reads Prefect's or proactflow's settings, and none of
which starts a thread. polars and pyarrow (about 0.5 s together) are left to each child: they
start native threads as they are imported (their allocators' background threads, polars' spill
cleaner), and a fork copies only the forking thread, so a lock one of those held would stay held
in every child."""

MAX_FD = 4096
REQUEST_SECONDS = 5.0
"""How long a connected client has to send its request."""


def _serve(path: str) -> None:
    before = dict(os.environ)
    for name in PRELOADED:
        __import__(name)
    assert "prefect" not in sys.modules and "proactflow" not in sys.modules
    # What a child could not have as a fresh interpreter has it (see PRELOADED): then every
    # command starts cold, with this reason in the run's warnings. huggingface_hub reads the
    # HF_ variables as it is imported and the template leaves it to each child
    # (warm_spawn.READ_AT_IMPORT lists no HF_): imported by a preloaded library, it would hand
    # every child the template's HF_ settings.
    threads = len(os.listdir("/proc/self/task"))
    changed = sorted(name for name in set(os.environ) | set(before)
                     if os.environ.get(name) != before.get(name))
    refusal = None
    if threads != 1 or changed:
        refusal = f"left {threads} threads and changed the environment in {changed}"
    elif "huggingface_hub" in sys.modules:
        refusal = "imported huggingface_hub, which reads the HF_ variables at import"
    if refusal is not None:
        sys.stdout.write(f"refused: importing {', '.join(PRELOADED)} {refusal}\n")
        sys.stdout.flush()
        return
    # What every child would otherwise walk in its own first full collection: the command
    # freezes its start-up heap after one (proactflow's gcpolicy), which then walks only what
    # the child imported itself. Frozen before forking, the pages stay shared, too.
    import gc

    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    parent = os.getppid()
    waiting: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while os.getppid() == parent:
        ready, _, _ = select.select([listener], [], [], 0.02)
        if ready:
            try:
                connection, _ = listener.accept()
                # A client that connected and never sent (a test stopped between the two, by
                # its timeout's signal) would hold the template here, and with it the status
                # of every child it runs: at most a few seconds.
                connection.settimeout(REQUEST_SECONDS)
                message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
                connection.settimeout(None)
                request = json.loads(message)
            except (OSError, ValueError) as error:  # a test gone mid-request: serve the next
                print(f"warm template: a request failed: {error!r}", file=sys.stderr)
                continue
            if len(fds) != 3:
                connection.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                try:
                    listener.close()
                    for other in waiting.values():
                        other.close()
                    connection.close()
                    _become(request, fds)
                finally:
                    os._exit(70)
            for fd in fds:
                os.close(fd)
            waiting[pid] = connection
            try:
                connection.send(str(pid).encode())
            except OSError:
                pass  # the test that asked is gone; the child is reaped all the same
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            connection = waiting.pop(pid, None)
            if connection is not None:
                try:
                    connection.send(str(status).encode())
                except OSError:
                    pass  # the test that started it is gone
                connection.close()


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: take the request's streams, session, folder and environment, then
    run its command as `python -m …`, `python -c …` or `python script.py` would, and exit as
    the interpreter does."""
    import atexit as child_atexit
    import io
    import logging
    import runpy
    import threading as child_threading
    import traceback

    # A fresh interpreter started by the test would take SIGINT as KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target, inheritable=True)
    os.closerange(3, MAX_FD)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    child_atexit._clear()  # type: ignore[attr-defined]  # the template's, not the command's

    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding = os.environ.get("PYTHONIOENCODING", "utf-8")

    def writer(fd: int, errors: str, line_buffering: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "wb", closefd=False)
        binary: Any = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(binary, encoding=encoding, errors=errors,
                                line_buffering=line_buffering or os.isatty(fd),
                                write_through=unbuffered)

    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "rb", closefd=False)), encoding=encoding)
    sys.stdout = sys.__stdout__ = writer(1, "strict", False)
    sys.stderr = sys.__stderr__ = writer(2, "backslashreplace", True)

    argv = request["argv"]
    code, interrupted = 0, False
    try:
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        elif argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            sys.path[0] = ""
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        else:  # a script
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.realpath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:  # noqa: BLE001 - as the interpreter: print it, status 1
        traceback.print_exc()
        code = 1
    # What the interpreter does at its end: wait for non-daemon threads, run the exit
    # functions, flush logging and the streams.
    try:
        child_threading._shutdown()  # type: ignore[attr-defined]
    except BaseException:  # noqa: BLE001
        pass
    child_atexit._run_exitfuncs()  # type: ignore[attr-defined]
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    os._exit(code)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for pytest
    _serve(sys.argv[1])
    sys.exit(0)
