"""The command's processes started warm: forked from a template process that has already
imported the heavy third-party libraries (litellm, openai, polars, pyarrow, aiohttp, httpx,
pydantic, diskcache), instead of a fresh interpreter importing them again. On the 2-core CI
machine those imports are about 6 to 8 s of CPU for every `proactflow` a test starts, most of
the CPU of a short run.

Each command is still a process of its own: its own pid, session when asked, standard streams,
environment and working folder; it takes signals, dies of SIGKILL and exits with its status as
a fresh interpreter would (an uncaught KeyboardInterrupt ends it by SIGINT). So the tests about
the process (kill -9, Ctrl-C, exit codes, two processes sharing a limit) keep their meaning.
The template never imports Prefect or proactflow, which read their settings from the
environment when imported; a command whose environment differs from the template's in a
variable the preloaded libraries read at import (LITELLM_*, POLARS_*, PYTHON*, SSL_*...), or
that asks for interpreter options, starts cold, as before.

    process = warm_spawn.Popen([sys.executable, "-m", "proactflow.cli", "run", ...], env=env)
    process = warm_spawn.Popen([sys.executable, "tests/some_worker.py", ...])
    done = warm_spawn.run([...], capture_output=True, text=True, timeout=120)

`Popen` is `subprocess.Popen` with the child made by the template (its wait status comes back
on a socket, the template being its parent); `run` is `subprocess.run` on it. One template per
pytest process, started at its first use and stopped with the process (it also stops when its
parent is gone, and the tests' reaper ends what it started; one found dead is started again).

It is on unless PROACTFLOW_TEST_WARM=0, which starts every command as a fresh interpreter (to
tell a failure of the warm start from one of the command). A template found dead is named in
the run's warnings (with the end of its log) and started again; a command whose template went
before telling its status gets 255, never a success. The warm start's own tests failed in one
full CI run (2026-11-29) because, with it off, they started the template late, when the worker
held over 1,024 descriptors, past what select() takes; it waits with poll() since.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PRELOADED = ("litellm", "openai", "polars", "pyarrow", "pyarrow.parquet", "aiohttp", "httpx",
             "pydantic", "diskcache")
"""What the template imports: the libraries that make a fresh `proactflow` slow to start,
none of which reads Prefect's or proactflow's settings."""

READ_AT_IMPORT = ("LITELLM_", "POLARS_", "ARROW_", "PYARROW_", "PYTHON", "SSL_", "AIOHTTP_",
                  "HTTPX_", "OPENAI_LOG", "HF_", "CURL_CA", "REQUESTS_CA")
"""Prefixes of environment variables a preloaded library may read while it is imported: a
command whose values differ from the template's starts cold."""

WARM_ENV = "PROACTFLOW_TEST_WARM"


def enabled() -> bool:
    """Whether commands start warm: unless PROACTFLOW_TEST_WARM=0."""
    return os.environ.get(WARM_ENV, "1") != "0"
START_SECONDS = 180
TEMPLATE_GONE = 255
"""The exit status a command gets when the template, its parent, went before telling it."""
MAX_FD = 4096


# ---------------------------------------------------------------- the template (its own process)

_SET_BY_IMPORTS: dict[str, str] = {}
"""What the preloaded libraries put in the environment as they were imported (litellm sets
TIKTOKEN_CACHE_DIR to its bundled tokenizers when unset): a child gets it as a fresh
interpreter's imports would give it."""


def _serve(path: str) -> None:
    before = dict(os.environ)
    for name in PRELOADED:
        __import__(name)
    _SET_BY_IMPORTS.update((name, value) for name, value in os.environ.items()
                           if name not in before)
    assert "prefect" not in sys.modules and "proactflow" not in sys.modules
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
                message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
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
    run its command as `python -m …`, `python -c …` or `python script.py` would, and exit as the interpreter does."""
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
    for name, value in _SET_BY_IMPORTS.items():
        os.environ.setdefault(name, value)
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


# ---------------------------------------------------------------- the test process's side

class _Template:
    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="proactflow-warm-")
        self.path = os.path.join(self.folder, "socket")
        self.environment = dict(os.environ)
        self.process = subprocess.Popen(
            [sys.executable, __file__, self.path], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.folder, "template.log"), "wb"),
            env=self.environment)
        self.ready = False
        self._reading = threading.Lock()  # "ready" is one line: one thread reads it

    def wait_ready(self) -> bool:
        with self._reading:
            return self._wait_ready()

    def _wait_ready(self) -> bool:
        if self.ready:
            return self.process.poll() is None
        assert self.process.stdout is not None
        # poll, not select: a template started late in a run (again, or first in the warm
        # start's own tests) gets a descriptor numbered past select's 1,024 (a full CI run's
        # pytest worker held that many), which select refuses.
        waiting = select.poll()
        waiting.register(self.process.stdout, select.POLLIN)
        found = waiting.poll(START_SECONDS * 1000)
        self.ready = bool(found) and self.process.stdout.readline().strip() == b"ready"
        return self.ready and self.process.poll() is None

    def last_words(self) -> str:
        try:
            with open(os.path.join(self.folder, "template.log"), "rb") as log:
                return log.read()[-1500:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


_template: _Template | None = None
_template_lock = threading.Lock()


def _running_template() -> _Template | None:
    global _template
    if not enabled():
        return None
    with _template_lock:
        if _template is not None and _template.process.poll() is None \
                and _read_at_import(_template.environment) != _read_at_import(os.environ):
            # This process's environment changed since (in what the preloaded libraries read
            # at import): every command would start cold. A template of today's environment.
            import warnings

            changed = sorted(set(_read_at_import(_template.environment).items())
                             ^ set(_read_at_import(os.environ).items()))
            warnings.warn(f"the environment changed under the warm template ({changed}): "
                          "starting another", stacklevel=2)
            _template.stop()
            _template = None
        if _template is not None and _template.process.poll() is not None:
            # Gone: said in the run's warnings summary (with what it wrote), then another.
            import warnings

            warnings.warn(f"the warm template exited ({_template.process.returncode}): "
                          f"{_template.last_words()!r}; starting another", stacklevel=2)
            _template.stop()
            _template = None
        if _template is None:
            _template = _Template()
            atexit.register(_template.stop)
        template = _template
    return template if template.wait_ready() else None


def _read_at_import(environment: Any) -> dict[str, str]:
    return {name: value for name, value in environment.items()
            if name.startswith(READ_AT_IMPORT)}


def cold_reason(env: dict[str, str] | None = None) -> str:
    """Why a plain command with `env` (this process's by default) would start cold now: for a
    test's message."""
    template = _running_template()
    if template is None:
        return "no warm template (PROACTFLOW_TEST_WARM=0, or it did not start)"
    differing = sorted(set(_read_at_import(env if env is not None else os.environ).items())
                       ^ set(_read_at_import(template.environment).items()))
    return (f"template {template.process.pid} running={template.process.poll() is None}; "
            f"read at import and different: {differing}")


def prestart() -> None:
    """Start this process's template now (in the background): its imports then overlap the
    first tests instead of holding up the first command."""
    if enabled():
        with _template_lock:
            global _template
            if _template is None:
                _template = _Template()
                atexit.register(_template.stop)


def _warm_argv(args: Any, executable: Any, env: dict[str, str] | None, shell: bool,
               extra: dict[str, Any], template: _Template) -> list[str] | None:
    """The command's arguments after the interpreter when the template can run it, else None."""
    if shell or executable is not None or not isinstance(args, (list, tuple)):
        return None
    argv = [os.fsdecode(a) for a in args]
    if len(argv) < 2 or argv[0] != sys.executable:
        return None
    if argv[1] in ("-m", "-c") and len(argv) < 3:
        return None
    if argv[1] not in ("-m", "-c") and (argv[1].startswith("-") or not argv[1].endswith(".py")
                                        or not os.path.isfile(argv[1])):
        return None
    if any(extra.values()):
        return None
    mine = env if env is not None else os.environ
    for name in set(mine) | set(template.environment):
        if name.startswith(READ_AT_IMPORT) and mine.get(name) != template.environment.get(name):
            return None
    return argv[1:]


class Popen(subprocess.Popen):
    """subprocess.Popen whose child is forked from the warm template when it can be (see the
    module's docstring), else started as subprocess.Popen starts it."""

    _connection: socket.socket | None = None
    _warm = False

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                       startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
                       c2pwrite, errread, errwrite, restore_signals, gid, gids, uid, umask,
                       start_new_session, *rest):
        extra = {"preexec_fn": preexec_fn, "pass_fds": pass_fds, "gid": gid, "gids": gids,
                 "uid": uid, "umask": umask if umask != -1 else None,
                 "process_group": rest[0] if rest and rest[0] not in (-1, None) else None}
        template = _running_template()
        argv = template and _warm_argv(args, executable, env, shell, extra, template)
        if template is None or argv is None:
            return super()._execute_child(
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                restore_signals, gid, gids, uid, umask, start_new_session, *rest)
        streams = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
                   errwrite if errwrite != -1 else 2]
        request = {"argv": argv, "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
                   "env": {os.fsdecode(k): os.fsdecode(v)
                           for k, v in (env if env is not None else os.environ).items()},
                   "new_session": bool(start_new_session)}
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            connection.connect(template.path)
            socket.send_fds(connection, [json.dumps(request).encode()], streams)
            reply = connection.recv(64)
        except OSError:
            connection.close()
            raise
        if not reply:
            connection.close()
            raise OSError(f"the warm template did not start {argv[:2]}")
        self._connection = connection
        self._warm = True
        self.pid = int(reply)
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _try_wait(self, wait_flags):
        if not self._warm:
            return super()._try_wait(wait_flags)
        if self._connection is None:  # already told
            return (self.pid, 0)
        self._connection.setblocking(not (wait_flags & os.WNOHANG))
        try:
            reply = self._connection.recv(64)
        except BlockingIOError:
            return (0, 0)
        self._connection.close()
        self._connection = None
        if not reply:  # the template is gone, and the child's status with it: not a success
            return (self.pid, TEMPLATE_GONE << 8)
        return (self.pid, int(reply))

    def _internal_poll(self, _deadstate=None, *args, **kwargs):
        if not self._warm:
            return super()._internal_poll(_deadstate, *args, **kwargs)
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None and self._connection is not None:
                    pid, status = self._try_wait(os.WNOHANG)
                    if pid == self.pid:
                        self._handle_exitstatus(status)
            except OSError:
                if _deadstate is not None:
                    self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()
        return self.returncode


def run(*popenargs: Any, input: Any = None, capture_output: bool = False,
        timeout: float | None = None, check: bool = False, **kwargs: Any
        ) -> subprocess.CompletedProcess:
    """subprocess.run on `Popen` (the same arguments, the same result and errors)."""
    if capture_output:
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with Popen(*popenargs, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        if check and code:
            raise subprocess.CalledProcessError(code, process.args, output=stdout,
                                                stderr=stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for pytest
    _serve(sys.argv[1])
    sys.exit(0)
