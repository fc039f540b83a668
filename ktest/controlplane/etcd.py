"""etcd for one control plane: loopback only, TLS with client certificates, private data directory.

etcd trusts a CA of its own (key never on disk), not the cluster's: only the API server's client
certificate can talk to it, not a user certificate from ``cp.add_user``.
"""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass
from pathlib import Path

from ktest.base.certs import CertificateAuthority
from ktest.base.process import ManagedProcess, component_environment
from ktest.controlplane.flags import probe

MEMBER_NAME = "ktest"
_NAMES = ("localhost",)
_ADDRESSES = ("127.0.0.1",)
HEARTBEAT_MS = 100
ELECTION_TIMEOUT_MS = 500  # etcd requires at least 5 heartbeats


@dataclass(frozen=True)
class EtcdCredentials:
    """etcd's CA, its serving (and peer) key pair, and the API server's client key pair."""

    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def create(cls, directory: Path) -> EtcdCredentials:
        """A fresh CA (key kept in memory only) and the certificates it signs."""
        ca = CertificateAuthority(directory, "ktest-etcd-ca", write_key=False)
        server = ca.serving("server", _NAMES, _ADDRESSES, common_name="etcd", also_client=True)
        client = ca.client("apiserver-etcd-client", "kube-apiserver-etcd-client")
        return cls(ca.cert_path, server.cert_path, server.key_path, client.cert_path, client.key_path)

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


def etcd_process(
    binary: Path,
    *,
    data_dir: Path,
    client_port: int,
    peer_port: int,
    credentials: EtcdCredentials,
    log_path: Path,
) -> ManagedProcess:
    """An etcd on 127.0.0.1 only, serving TLS to clients holding a certificate from
    its CA (peers too), without fsync when the binary allows it."""
    client_url = f"https://127.0.0.1:{client_port}"
    peer_url = f"https://127.0.0.1:{peer_port}"
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
        f"--cert-file={credentials.server_cert}",
        f"--key-file={credentials.server_key}",
        f"--trusted-ca-file={credentials.ca_cert}",
        "--client-cert-auth",
        f"--peer-cert-file={credentials.server_cert}",
        f"--peer-key-file={credentials.server_key}",
        f"--peer-trusted-ca-file={credentials.ca_cert}",
        "--peer-client-cert-auth",
        "--log-level=warn",
    ]
    known = probe(binary)
    if known.accepts("election-timeout") and known.accepts("heartbeat-interval"):
        # A lone member fast-forwards all but one election tick and then waits a random part of
        # the election timeout (default 1 s) before it elects itself: at 500 ms that stays hidden
        # behind the API server's own start. Each heartbeat tick costs CPU even without peers:
        # at 10 ms an idle etcd used 2.3% of a core, at 100 ms 0.7% (bench/idle_plane.py).
        command += [f"--heartbeat-interval={HEARTBEAT_MS}", f"--election-timeout={ELECTION_TIMEOUT_MS}"]
    if known.accepts("unsafe-no-fsync"):
        # Test data is disposable: skipping fsync makes every write much cheaper.
        command.append("--unsafe-no-fsync")
    return ManagedProcess("etcd", command, log_path, env=component_environment())


def etcd_healthy(client_port: int, credentials: EtcdCredentials) -> bool:
    """True when etcd's ``/health`` answers ``{"health": "true"}`` to the API server's certificate."""
    try:
        context = credentials.client_context()
    except (OSError, ssl.SSLError):
        return False
    connection = http.client.HTTPSConnection("127.0.0.1", client_port, timeout=1, context=context)
    try:
        connection.request("GET", "/health")
        response = connection.getresponse()
        body = response.read()
        return response.status == 200 and json.loads(body).get("health") == "true"
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        connection.close()
