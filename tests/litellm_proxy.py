"""The litellm proxy (the gateway many teams put in front of their models) on loopback, in front of
the llama.cpp tier's server (llama_server.py), for the gateway tier (test_litellm_proxy.py).

It runs from a virtualenv of its own, `.venv-proxy` beside the repository's `.venv`: the proxy's
dependencies are not proactflow's and may disagree with requirements.lock, so they never enter
the project's venv. `python tests/litellm_proxy.py` builds it (once; .ci/run does): litellm at
the version requirements.lock pins, and the requirements of its `proxy` extra as that version's
own metadata lists them, less `litellm-proxy` (named by the extra, published nowhere: the proxy
ships inside litellm itself).

The proxy is set up as a small team would: a master key, one model with a requests-per-minute
limit of its own in `model_list`, no database. Measured with it: without a database a wrong key
is answered HTTP 400 "No connected db.", a 429 carries `llm_provider-retry-after` (no
`Retry-After`), and the files API answers HTTP 500 until `files_settings` is configured.
"""

from __future__ import annotations

import json
import os
import secrets
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from ports import free_port

REPO = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("PROACTFLOW_PROXY_VENV") or REPO / ".venv-proxy")
"""Where the proxy's own virtualenv is (PROACTFLOW_PROXY_VENV moves it, e.g. to a CI cache)."""
MASTER_KEY = "sk-" + secrets.token_hex(12)  # made per test process: no key is committed
START_TIMEOUT_S = 180
INSTALL_TIMEOUT_S = 1200
UNLISTED = ("websockets", "orjson", "apscheduler", "PyJWT", "semver", "python-multipart",
            "expression")
"""What the proxy imports at start that its extra leaves to `litellm-proxy` (measured: each
missing one stops `litellm --config` with "Missing dependency"; the list may not be
complete yet: the proxy has not started end to end here)."""


class ProxyUnavailable(RuntimeError):
    pass


def locked_litellm() -> str:
    """The litellm version requirements.lock pins."""
    found = re.search(r"^litellm==(\S+)$", (REPO / "requirements.lock").read_text(), re.M)
    if found is None:
        raise ProxyUnavailable("requirements.lock pins no litellm")
    return found[1]


def python() -> Path:
    return VENV / "bin" / "python"


def installed(deep: bool = False) -> str | None:
    """Why the proxy cannot run from VENV, None when it can: litellm at the locked version with
    its proxy's module (`deep`: the proxy imported, as after a build; about 15 s of CPU, which a
    test run leaves to the proxy's own start, whose failure says the same with its log)."""
    if not python().exists():
        return f"no virtualenv at {VENV} (python tests/litellm_proxy.py builds it)"
    probe = ("import importlib.metadata as m, litellm.proxy.proxy_server; "
             "print(m.version('litellm'))" if deep else
             "import importlib.metadata as m; d = m.distribution('litellm'); "
             "assert d.locate_file('litellm/proxy/proxy_server.py').exists(), "
             "'litellm has no proxy module'; print(d.version)")
    check = subprocess.run(
        [str(python()), "-c", probe], capture_output=True, text=True, timeout=300,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    if check.returncode != 0:
        last = (check.stderr.strip().splitlines() or ["?"])[-1]
        return f"the litellm proxy does not import in {VENV} ({last})"
    version = check.stdout.strip().splitlines()[-1]
    if version != locked_litellm():
        return f"{VENV} has litellm {version}, requirements.lock pins {locked_litellm()}"
    return None


def install() -> None:
    """Build VENV: litellm as locked, then its proxy extra's requirements (but litellm-proxy)."""
    version = locked_litellm()
    if version in ("1.82.7", "1.82.8"):  # malicious releases: never installed
        raise ProxyUnavailable(f"litellm {version} is never installed")
    if not python().exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(python()), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"litellm=={version}"], check=True, timeout=INSTALL_TIMEOUT_S)
    listed = subprocess.run(
        [str(python()), "-c", "import importlib.metadata as m, json; "
                              "print(json.dumps(m.requires('litellm') or []))"],
        check=True, capture_output=True, text=True).stdout
    extra = [_unpinned(requirement.split(";")[0].strip()) for requirement in json.loads(listed)
             if re.search(r"""extra\s*==\s*["']proxy["']""", requirement)
             and not requirement.startswith("litellm-proxy")
             and _applies(requirement.split(";", 1)[1])]
    subprocess.run([*pip, f"litellm=={version}", *extra, *UNLISTED], check=True,
                   timeout=INSTALL_TIMEOUT_S)


def _unpinned(requirement: str) -> str:
    """An exact pin (`name==1.2.3.post1`) as its name alone: the extra pins litellm's companion
    packages to releases a registry may not carry (litellm-enterprise 0.1.83.post1 is not on
    every mirror), and any release of them serves the tier's few routes."""
    return re.split(r"\s*===?\s*", requirement, maxsplit=1)[0] if "==" in requirement \
        else requirement


def _applies(marker: str) -> bool:
    """Whether an environment marker holds in VENV's interpreter (the extra's are simple)."""
    condition = re.sub(r"""(and\s+)?extra\s*==\s*["']proxy["']""", "", marker).strip()
    condition = re.sub(r"^and\s+|\s+and$", "", condition).strip()
    if not condition:
        return True
    probe = subprocess.run(
        [str(python()), "-c", "import sys; from pip._vendor.packaging.markers import Marker; "
                              "sys.exit(0 if Marker(sys.argv[1]).evaluate() else 1)", condition],
        capture_output=True)
    return probe.returncode == 0


class LitellmProxy:
    """The proxy serving `models` (name -> model at `upstream`), each limited to `rpm`."""

    def __init__(self, upstream: str, models: list[str], workdir: Path, rpm: int):
        self.upstream, self.models, self.workdir, self.rpm = upstream, models, workdir, rpm
        self.process: subprocess.Popen | None = None
        self.port = 0

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def config(self) -> str:
        lines = ["model_list:"]
        for name in self.models:
            lines += [f"  - model_name: {name}",
                      "    litellm_params:",
                      f"      model: openai/{name}",
                      f"      api_base: {self.upstream}",
                      "      api_key: no-key",
                      f"      rpm: {self.rpm}"]
        lines += ["router_settings:",
                  "  enable_pre_call_checks: true",
                  "general_settings:",
                  f"  master_key: {MASTER_KEY}",
                  "litellm_settings:",
                  "  telemetry: false",
                  "  num_retries: 0"]
        return "\n".join(lines) + "\n"

    def start(self) -> "LitellmProxy":
        reason = installed()
        if reason is not None:
            raise ProxyUnavailable(reason)
        self.port = free_port()
        config = self.workdir / "litellm-proxy.yaml"
        config.write_text(self.config())
        self.log = open(self.workdir / "litellm-proxy.log", "wb")
        environment = {name: value for name, value in os.environ.items()
                       if not name.startswith(("DATABASE_URL", "LITELLM_", "OPENAI_"))}
        self.process = subprocess.Popen(
            [str(python()), "-m", "litellm.proxy.proxy_cli", "--config", str(config),
             "--host", "127.0.0.1", "--port", str(self.port), "--num_workers", "1",
             "--telemetry", "False"],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.workdir,
            env={**environment, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                 "NO_DOCS": "True", "DISABLE_ADMIN_UI": "True"})
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise ProxyUnavailable("the litellm proxy exited at start: "
                                       + (self.workdir / "litellm-proxy.log").read_text()[-800:])
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{self.port}/health/liveliness", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise ProxyUnavailable("the litellm proxy did not answer within "
                                           f"{START_TIMEOUT_S} s") from None
                time.sleep(0.3)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if getattr(self, "log", None):
            self.log.close()


if __name__ == "__main__":  # build the proxy's virtualenv (.ci/run does, once)
    reason = installed(deep=True)
    if reason is None:
        print(f"the litellm proxy is installed in {VENV}")
        sys.exit(0)
    print(f"building {VENV}: {reason}")
    install()
    reason = installed(deep=True)
    print(reason or f"the litellm proxy is installed in {VENV}")
    sys.exit(1 if reason else 0)
