"""etcd for one control plane: loopback only, private data directory."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

from ktest.controlplane.flags import probe
from ktest.controlplane.process import ManagedProcess

MEMBER_NAME = "ktest"


def etcd_process(
    binary: Path, *, data_dir: Path, client_port: int, peer_port: int, log_path: Path
) -> ManagedProcess:
    """An etcd listening on 127.0.0.1 only, without fsync when the binary allows it."""
    client_url = f"http://127.0.0.1:{client_port}"
    peer_url = f"http://127.0.0.1:{peer_port}"
    command = [
        str(binary),
        f"--name={MEMBER_NAME}",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster={MEMBER_NAME}={peer_url}",
        "--initial-cluster-state=new",
        "--log-level=warn",
    ]
    if probe(binary).accepts("unsafe-no-fsync"):
        # Test data is disposable: skipping fsync makes every write much cheaper.
        command.append("--unsafe-no-fsync")
    return ManagedProcess("etcd", command, log_path)


def etcd_healthy(client_port: int) -> bool:
    """True when etcd's ``/health`` answers ``{"health": "true"}``."""
    connection = http.client.HTTPConnection("127.0.0.1", client_port, timeout=1)
    try:
        connection.request("GET", "/health")
        response = connection.getresponse()
        body = response.read()
        return response.status == 200 and json.loads(body).get("health") == "true"
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        connection.close()
