"""Ctrl-C as a terminal sends it (issue #31): SIGINT to a command's whole process group, at a
random moment (before the first call, mid-calls, while the last replies are written). A run
without PREFECT_API_URL starts no process; one asked for a temporary Prefect server
(--temporary-prefect-server), and a sweep, run it in a session of its own, so the signal
reaches the command only: it ends with exit status 130 within seconds, one line, no
traceback, no "Error logging to API" dump, and its temporary server is gone. A second Ctrl-C
ends it at once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI
from helpers import cli_args
import prefect_database
from replay import ANSWERABLE, JUDGE_PROMPT, scaled_corpus, synthetic_judge, synthetic_model
import warm_spawn

LATENCY = 0.5


@pytest.fixture(scope="module")
def prefect_home(tmp_path_factory) -> Path:
    """One PREFECT_HOME for the module, its database already migrated (prefect_database.py)."""
    return prefect_database.seeded_home(tmp_path_factory.mktemp("prefect-home"))


@pytest.fixture
def slow_fake():
    with FakeOpenAI({"synth": synthetic_model, "synth2": synthetic_model,
                     "judge2": synthetic_judge},
                    latency=LATENCY) as server:
        yield server


def _environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    return env


def _servers_of(home: Path) -> list[int]:
    """Processes of a temporary Prefect server started with this PREFECT_HOME."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"proactflow.prefect_server.serve" in (entry / "cmdline").read_bytes() and \
                    f"PREFECT_HOME={home}".encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


COPIES = 3


def _start(fake: FakeOpenAI, tmp_path: Path, home: Path, *extra: str
           ) -> subprocess.Popen[str]:
    corpus, _ = scaled_corpus(tmp_path, COPIES)
    args = cli_args(fake, tmp_path / "store", eval_model="openai/synth",
                    judge_model="openai/judge2", corpus=corpus,
                    extra=("--concurrency", "2", *extra))
    # A process group of its own, as a terminal gives a command.
    return warm_spawn.Popen([sys.executable, "-m", "proactflow.cli", "run", *args],
                            env=_environment(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_for(condition, process: subprocess.Popen[str], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run did not get that far"
        time.sleep(0.01)


def _interrupted(process: subprocess.Popen[str], home: Path, times: int = 1) -> str:
    for time_ in range(times):
        try:
            os.killpg(process.pid, signal.SIGINT)  # the whole group, as a terminal does
        except ProcessLookupError:
            assert time_ > 0, "the command was gone before its Ctrl-C"
            break  # the first Ctrl-C had ended it all already: nothing left to stop
        time.sleep(0.2)
    try:
        _, stderr = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        pytest.fail(f"still running 10 s after Ctrl-C:\n{process.communicate()[1][-3000:]}")
    assert process.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "Error logging to API" not in stderr, stderr[-3000:]
    assert stderr.count("proactflow: interrupted.") == 1, stderr[-3000:]
    deadline = time.monotonic() + 10
    while _servers_of(home):
        assert time.monotonic() < deadline, "the temporary Prefect server outlived its command"
        time.sleep(0.1)
    return stderr


@pytest.mark.parametrize("seed", [1, 2])
def test_ctrl_c_before_the_first_call(slow_fake, tmp_path, prefect_home, seed):
    process = _start(slow_fake, tmp_path, prefect_home)
    time.sleep(random.Random(seed).uniform(0.1, 2.0))  # imports, checks, the server's start
    _interrupted(process, prefect_home)


@pytest.mark.parametrize("seed, temporary_server", [(3, False), (4, True)])
def test_ctrl_c_mid_calls(slow_fake, tmp_path, prefect_home, seed, temporary_server):
    process = _start(slow_fake, tmp_path, prefect_home,
                     *(["--temporary-prefect-server"] if temporary_server else []))
    _wait_for(lambda: sum(slow_fake.calls.values()) >= 2, process)
    if temporary_server:
        assert _servers_of(prefect_home), "no temporary Prefect server for the run"
    else:
        assert not _servers_of(prefect_home) and not _children_of(process.pid), \
            "a run without PREFECT_API_URL started a process"
    time.sleep(random.Random(seed).uniform(0, LATENCY * 2))
    _interrupted(process, prefect_home)


def test_ctrl_c_while_the_last_replies_are_written(slow_fake, tmp_path, prefect_home):
    process = _start(slow_fake, tmp_path, prefect_home)
    _wait_for(lambda: slow_fake.calls["judge2"] >= ANSWERABLE * COPIES, process)
    # The last requests have arrived; their replies come back after LATENCY, and a run that
    # reports to no Prefect server ends within a fraction of a second after them (a signal
    # during the interpreter's last milliseconds meets no handler: it ends the process).
    time.sleep(random.Random(5).uniform(LATENCY * 0.8, LATENCY * 1.1))
    if process.poll() is None:
        _interrupted(process, prefect_home)
    else:
        assert process.returncode == 0


def test_a_second_ctrl_c_ends_at_once(slow_fake, tmp_path, prefect_home):
    process = _start(slow_fake, tmp_path, prefect_home)
    _wait_for(lambda: sum(slow_fake.calls.values()) >= 2, process)
    _interrupted(process, prefect_home, times=2)


def _children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def test_ctrl_c_of_a_sweep_over_processes(slow_fake, tmp_path, prefect_home):
    """A sweep's other processes run in sessions of their own too: the sweep stops them, and
    ends as a run does."""
    corpus, _ = scaled_corpus(tmp_path, COPIES)
    models = "".join(f'\n[[models]]\nmodel = "openai/{name}"\napi_base = "{slow_fake.url}"\n'
                     for name in ("synth", "synth2"))
    config = tmp_path / "sweep.toml"
    config.write_text(f"""
store = "{tmp_path / 'store'}"
corpus = "{corpus}"
judge_prompt = "{JUDGE_PROMPT}"
concurrency = 2
processes = 2

[[judges]]
model = "openai/judge2"
api_base = "{slow_fake.url}"
{models}""")
    process = warm_spawn.Popen([sys.executable, "-m", "proactflow.cli", "sweep", "--config",
                                str(config)], env=_environment(prefect_home),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    _wait_for(lambda: sum(slow_fake.calls.values()) >= 4, process)
    children = [pid for pid in _children_of(process.pid)
                if b"process_group" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert children, "the sweep runs no other process"
    _interrupted(process, prefect_home)
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or \
            Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z", "a child outlived the sweep"


def test_a_ctrl_c_while_the_server_module_is_still_being_imported_ends_with_its_one_line(
        monkeypatch, capsys):
    """A Ctrl-C that ends the command while proactflow.prefect_server.api is only partly run
    (seen in a full test run: the command's imports take seconds): no ImportError from the
    handler, the one line, exit status 130. No temporary server can have started then."""
    import types

    from proactflow.cli import interrupts

    partial = types.ModuleType("proactflow.prefect_server.api")  # stop_at_once not defined yet
    monkeypatch.setitem(sys.modules, "proactflow.prefect_server.api", partial)
    exits = []

    def exit_(status: int) -> None:
        exits.append(status)
        raise SystemExit(status)

    monkeypatch.setattr(interrupts.os, "_exit", exit_)
    with pytest.raises(SystemExit):
        interrupts.end_now()
    assert exits == [130]
    assert "interrupted" in capsys.readouterr().err
