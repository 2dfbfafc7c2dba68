"""The tests' warm start of the command's processes (warm_spawn.py) keeps what a fresh
interpreter would do: arguments, folder, environment, streams, exit status, death by a signal,
a session of its own; and starts cold whatever the template could not run as it would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

import warm_spawn

PY = sys.executable


@pytest.fixture(autouse=True)
def _warm(monkeypatch):
    monkeypatch.setenv(warm_spawn.WARM_ENV, "1")


def test_a_command_gets_its_arguments_folder_environment_and_streams(tmp_path):
    done = warm_spawn.run(
        [PY, "-c", "import os, sys; print(sys.argv[1:], os.getcwd(), os.environ['ONLY_HERE']);"
         " print('to stderr', file=sys.stderr); sys.exit(3)", "a", "b"],
        cwd=tmp_path, env=dict(os.environ, ONLY_HERE="yes"), capture_output=True, text=True,
        timeout=240)
    assert done.returncode == 3
    assert done.stdout == f"['a', 'b'] {tmp_path} yes\n"
    assert done.stderr == "to stderr\n"


def test_a_module_and_a_script_run_as_python_runs_them(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys\nprint(__name__, sys.argv[1:], sys.path[0])\n")
    assert warm_spawn.run([PY, str(script), "x"], capture_output=True, text=True,
                          timeout=240).stdout == f"__main__ ['x'] {tmp_path}\n"
    done = warm_spawn.run([PY, "-m", "json.tool"], input='{"a": 1}', capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0 and done.stdout == '{\n    "a": 1\n}\n'


def test_an_uncaught_exception_is_status_one_with_its_traceback():
    done = warm_spawn.run([PY, "-c", "raise ValueError('boom')"], capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith("ValueError: boom")


def test_ctrl_c_is_a_keyboard_interrupt_and_an_uncaught_one_ends_the_process_by_sigint():
    process = warm_spawn.Popen(
        [PY, "-c", "import sys, time\ntry:\n    print('up', flush=True)\n    time.sleep(60)\n"
         "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n    raise"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout.readline() == "up\n"
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == -signal.SIGINT
    assert process.stdout.read() == "interrupted\n"


def test_a_session_of_its_own_dies_of_sigkill_to_its_group_and_poll_sees_it():
    process = warm_spawn.Popen([PY, "-c", "print('up', flush=True); import time; "
                                "time.sleep(60)"], start_new_session=True,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "up\n"
    assert process.poll() is None
    assert os.getpgid(process.pid) == process.pid
    os.killpg(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert process.returncode == -signal.SIGKILL


def test_a_timeout_is_subprocess_s_and_the_process_is_killed():
    with pytest.raises(subprocess.TimeoutExpired):
        warm_spawn.run([PY, "-c", "import time; time.sleep(60)"], timeout=1)


def test_what_the_template_cannot_run_as_a_fresh_interpreter_starts_cold(tmp_path):
    """Interpreter options, and an environment that differs in what the preloaded libraries
    read at import, start a fresh interpreter: it shows in what the process sees."""
    probe = "import sys; print(sys.flags.optimize, 'litellm' in sys.modules)"
    warm = warm_spawn.run([PY, "-c", probe], capture_output=True, text=True, timeout=240)
    # Forked from the template: litellm already imported.
    assert warm.stdout == "0 True\n", warm_spawn.cold_reason()
    assert warm_spawn.run([PY, "-O", "-c", probe], capture_output=True, text=True,
                          timeout=240).stdout == "1 False\n"
    other = dict(os.environ, LITELLM_LOG="DEBUG")
    assert warm_spawn.run([PY, "-c", probe], env=other, capture_output=True, text=True,
                          timeout=240).stdout == "0 False\n"


def test_a_command_with_hf_settings_of_its_own_is_forked_warm_and_reads_them(tmp_path):
    """huggingface_hub is not preloaded (the template refuses to serve if a preloaded library
    imports it), so a command whose HF_ variables differ from the template's is forked warm
    and reads them itself, as the hub loader's tests need (tests/test_sources.py)."""
    probe = ("import sys; warm = 'litellm' in sys.modules; "
             "from huggingface_hub import constants; print(warm, constants.HF_HUB_CACHE)")
    done = warm_spawn.run([PY, "-c", probe], env=dict(os.environ, HF_HUB_CACHE=str(tmp_path)),
                          capture_output=True, text=True, timeout=240)
    assert done.stdout == f"True {tmp_path}\n", done.stderr[-2000:]
