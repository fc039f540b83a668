"""kube-apiserver for one control plane: flags, an authenticated HTTPS client, readiness."""

from __future__ import annotations

import http.client
import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ktest.base.process import ManagedProcess, component_environment
from ktest.controlplane.flags import merge_flags

if TYPE_CHECKING:  # certificates (cryptography) are not needed to check a running server
    from ktest.controlplane.etcd import EtcdCredentials

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# The first address of the service range: the `kubernetes` Service's cluster IP.
KUBERNETES_SERVICE_IP = "10.0.0.1"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVING_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
SERVING_IPS = ("127.0.0.1", KUBERNETES_SERVICE_IP)

# Flags ktest must own: changing them would point the readiness checks, the
# kubeconfigs or etcd somewhere the API server is not.
RESERVED_FLAGS = frozenset(
    {
        "bind-address",
        "secure-port",
        "etcd-servers",
        "etcd-cafile",
        "etcd-certfile",
        "etcd-keyfile",
        "cert-dir",
        "tls-cert-file",
        "tls-private-key-file",
        "client-ca-file",
    }
)

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


@dataclass(frozen=True)
class ApiServerFiles:
    """The files kube-apiserver is pointed at."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    service_account_key: Path
    service_account_public_key: Path
    cert_dir: Path
    etcd: EtcdCredentials
    audit_policy: Path | None = None
    audit_log: Path | None = None


# ktest's flags that are the same for every control plane (they also key the etcd templates,
# since they shape what the API server stores at bootstrap).
STATIC_FLAGS: dict[str, str] = {
    "bind-address": "127.0.0.1",
    "advertise-address": "127.0.0.1",
    "authorization-mode": "RBAC",
    "service-account-issuer": SERVICE_ACCOUNT_ISSUER,
    "service-cluster-ip-range": SERVICE_CLUSTER_IP_RANGE,
    "allow-privileged": "true",
    # The endpoint reconcilers refuse a loopback advertise address, and nothing
    # runs inside the cluster that would use the `kubernetes` Service's endpoints.
    "endpoint-reconciler-type": "none",
    # Nothing creates the `default` ServiceAccount of new namespaces (that is the
    # serviceaccount controller's job, which ktest does not run), so the admission
    # plugin would reject every Pod. Disabling it is what envtest does as well.
    "disable-admission-plugins": "ServiceAccount",
}


def default_flags(port: int, etcd_port: int, files: ApiServerFiles) -> dict[str, str | None]:
    """ktest's kube-apiserver flags, before the user's extra flags override them."""
    flags: dict[str, str | None] = {
        "secure-port": str(port),
        "etcd-servers": f"https://127.0.0.1:{etcd_port}",
        "etcd-cafile": str(files.etcd.ca_cert),
        "etcd-certfile": str(files.etcd.client_cert),
        "etcd-keyfile": str(files.etcd.client_key),
        "cert-dir": str(files.cert_dir),
        "tls-cert-file": str(files.serving_cert),
        "tls-private-key-file": str(files.serving_key),
        "client-ca-file": str(files.ca_cert),
        "service-account-key-file": str(files.service_account_public_key),
        "service-account-signing-key-file": str(files.service_account_key),
        **STATIC_FLAGS,
    }
    if files.audit_policy is not None and files.audit_log is not None:
        flags["audit-policy-file"] = str(files.audit_policy)
        flags["audit-log-path"] = str(files.audit_log)
    return flags


def apiserver_process(
    binary: Path,
    *,
    port: int,
    etcd_port: int,
    files: ApiServerFiles,
    extra_flags: Sequence[str] | Mapping[str, str | None],
    log_path: Path,
) -> ManagedProcess:
    arguments = merge_flags(default_flags(port, etcd_port, files), extra_flags)
    return ManagedProcess(
        "kube-apiserver", [str(binary), *arguments], log_path, env=component_environment()
    )


class ApiServerClient:
    """Minimal authenticated HTTPS GETs for readiness checks (no client library needed)."""

    def __init__(self, port: int, ca_cert: Path, client_cert: Path, client_key: Path) -> None:
        self.port = port
        self._context = ssl.create_default_context(cafile=str(ca_cert))
        self._context.load_cert_chain(str(client_cert), str(client_key))

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
        """(status, body); status 0 when the server cannot be reached."""
        return self.request("GET", path, timeout)

    def request(self, method: str, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
        """(status, body) of a request without a body; status 0 when the server cannot be reached."""
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self._context, timeout=timeout
        )
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            return 0, b""
        finally:
            connection.close()

    def ready(self) -> bool:
        """``/readyz`` is 200 and the ``default`` namespace exists."""
        status, _ = self.get("/readyz")
        if status != 200:
            return False
        status, _ = self.get("/api/v1/namespaces/default")
        return status == 200

    def version(self) -> dict[str, str]:
        status, body = self.get("/version")
        if status != 200:
            return {}
        try:
            data = json.loads(body)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
