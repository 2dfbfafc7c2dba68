"""The command's processes started warm: forked from a template process that has already
imported the heavy third-party libraries (litellm, openai, aiohttp, httpx, pydantic, diskcache;
never one that starts a thread: warm_template.PRELOADED), instead of a fresh interpreter
importing them again. On the 2-core CI machine those imports are about 5 to 8 s of CPU for
every `proactflow` a test starts, most of the CPU of a short run.

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

It is on unless PROACTFLOW_TEST_WARM=0 (which starts every command cold, as a fresh
interpreter). It was off by default for a day: the third full run with it on (2026-11-29, 17 min
6 s against 18 min 53 s and 24 min cold) saw one batched sweep's process, forked warm, not reach
its batch's last phase within 240 s. That did not happen again in two full runs nor in six runs
of the batched files (120 tests, 48 of them killing a sweep or a run mid-batch) with every child
watched for one older than 90 s, so its cause is not known; the one fork hazard the template
had is gone since: it imported polars and pyarrow, which start native threads, and a fork keeps
only the forking thread (a lock another one held stays held in the child). The template now
imports nothing that starts a thread, and refuses to fork, saying why, if one ever does.

A template found dead is named in the run's warnings (with the end of its log) and started
again; a command whose template went before telling its status gets 255, never a success. A
template started late (the warm start's own tests, when a worker holds over 1,024 descriptors)
waits with poll(), which takes any number.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from warm_template import PRELOADED  # noqa: F401 - the tests read it here

READ_AT_IMPORT = ("LITELLM_", "POLARS_", "ARROW_", "PYARROW_", "PYTHON", "SSL_", "AIOHTTP_",
                  "HTTPX_", "OPENAI_LOG", "CURL_CA", "REQUESTS_CA")
"""Prefixes of environment variables a preloaded library may read while it is imported: a
command whose values differ from the template's starts cold. Not HF_: huggingface_hub reads
those, and the template refuses to serve if a preloaded library imported it
(warm_template.py), so a child imports it, and reads them, itself."""

WARM_ENV = "PROACTFLOW_TEST_WARM"


def enabled() -> bool:
    """Whether commands start warm: unless PROACTFLOW_TEST_WARM=0."""
    return os.environ.get(WARM_ENV, "1") != "0"


START_SECONDS = 180
TEMPLATE_GONE = 255
"""The exit status a command gets when the template, its parent, went before telling it."""


# ---------------------------------------------------------------- the test process's side

class _Template:
    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="proactflow-warm-")
        self.path = os.path.join(self.folder, "socket")
        self.environment = dict(os.environ)
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("warm_template.py")), self.path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.folder, "template.log"), "wb"),
            env=self.environment)
        self.ready = False
        self.refusal = ""  # why it will not fork, if it said so (warm_template.py)
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
        said = self.process.stdout.readline().decode(errors="replace").strip() \
            if waiting.poll(START_SECONDS * 1000) else ""
        self.ready = said == "ready"
        if said.startswith("refused"):
            import warnings

            self.refusal = said
            warnings.warn(f"the warm template {said}: every command starts cold", stacklevel=2)
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
        if _template is not None and _template.process.poll() is not None \
                and not _template.refusal:  # a refusal would only be said again
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
        refused = _template.refusal if _template is not None else ""
        return refused or "no warm template (PROACTFLOW_TEST_WARM=0, or it did not start)"
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
