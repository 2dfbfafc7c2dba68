"""Whether a command's flows report to a Prefect server (prefect_server/api.reports_to_prefect):
the one PREFECT_API_URL names, in the environment or in a file Prefect reads its settings from;
with none, no server, and Prefect not even imported to find that out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("import sys; from proactflow.prefect_server.api import reports_to_prefect; "
         "print(reports_to_prefect(), 'prefect' in sys.modules)")


def probe(tmp_path, **environment: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "home"), **environment)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_no_server_named_is_known_without_importing_prefect(tmp_path):
    assert probe(tmp_path) == "False False"


def test_a_server_in_the_environment(tmp_path):
    assert probe(tmp_path, PREFECT_API_URL="http://127.0.0.1:4200/api") == "True False"


@pytest.mark.parametrize("names_one", [True, False])
def test_a_server_in_the_active_profile(tmp_path, names_one):
    (tmp_path / "home").mkdir()
    setting = 'PREFECT_API_URL = "http://prefect.lan:4200/api"' if names_one \
        else 'PREFECT_LOGGING_LEVEL = "INFO"'
    (tmp_path / "home" / "profiles.toml").write_text(
        f'active = "lan"\n\n[profiles.lan]\n{setting}\n\n[profiles.other]\n'
        'PREFECT_API_URL = "http://elsewhere:4200/api"\n')
    # A profile file that mentions a server makes Prefect's own settings decide.
    assert probe(tmp_path) == ("True True" if names_one else "False True")


def test_a_server_in_prefect_toml(tmp_path):
    (tmp_path / "prefect.toml").write_text('[api]\nurl = "http://prefect.lan:4200/api"\n')
    assert probe(tmp_path) == "True True"
