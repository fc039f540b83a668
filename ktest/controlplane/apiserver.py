"""kube-apiserver for one control plane: flags, an authenticated HTTPS client, readiness."""

from __future__ import annotations

import contextlib
import http.client
import json
import ssl
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ktest.base.process import ManagedProcess, component_environment
from ktest.base.procfs import write_private_file
from ktest.controlplane.admission import ADMISSION_CONFIG_FLAG
from ktest.controlplane.flags import flag_name, merge_flags, probe
from ktest.errors import AssetsError, ControlPlaneError

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


# kube-apiserver's post-start hooks that create the bootstrap objects and wait a fixed second
# before their first attempt (`wait.Poll(1*time.Second, ...)`): /readyz and /healthz stay red
# until they ran, ~1 s after the API server started serving.
BOOTSTRAP_HOOKS = (
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/scheduling/bootstrap-system-priority-classes",
)
READYZ_WITHOUT_BOOTSTRAP_HOOKS = "/readyz?" + "&".join(f"exclude={hook}" for hook in BOOTSTRAP_HOOKS)
# What those hooks (and the system-namespaces controller) create. An etcd template records the
# names it holds; a control plane started from it is ready once all of them are served.
BOOTSTRAP_LISTS = {
    "namespaces": "/api/v1/namespaces",
    "clusterroles": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "clusterrolebindings": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "roles": "/apis/rbac.authorization.k8s.io/v1/roles",
    "rolebindings": "/apis/rbac.authorization.k8s.io/v1/rolebindings",
    "priorityclasses": "/apis/scheduling.k8s.io/v1/priorityclasses",
}
_SERVICES = "/api/v1/namespaces/default/services"
_PROBE_NAME = "ktest-readiness-probe"
_PROBE_SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": _PROBE_NAME},
    "spec": {"type": "ClusterIP", "ports": [{"port": 80}]},
}
_JSON = {"Content-Type": "application/json"}
_METADATA_ONLY = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}


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
    # The API server's client certificate for admission webhooks (controlplane/admission.py).
    admission_config: Path | None = None


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


def extra_flag_names(extra_flags: Sequence[str] | Mapping[str, str | None]) -> set[str]:
    """The names of the user's ``apiserver_flags``; ControlPlaneError for a string or a flag
    ktest must own (:data:`RESERVED_FLAGS`)."""
    if isinstance(extra_flags, str):
        raise ControlPlaneError(f"apiserver_flags must be a list such as [{extra_flags!r}], not a string.")
    names = set(_flag_names(extra_flags))
    reserved = sorted(names & RESERVED_FLAGS)
    if reserved:
        raise ControlPlaneError(
            f"apiserver_flags may not set {', '.join('--' + name for name in reserved)}: "
            "ktest chooses the API server's address, port, certificates and etcd so that "
            "parallel control planes never collide. Remove those flags; cp.server and "
            "cp.kubeconfig tell where the API server listens."
        )
    return names


def _flag_names(extra_flags: Sequence[str] | Mapping[str, str | None]) -> list[str]:
    flags = extra_flags.keys() if isinstance(extra_flags, Mapping) else extra_flags
    return [flag_name(flag) for flag in flags]


def _unknown_flags_problem(extra_flags: Sequence[str] | Mapping[str, str | None], binary: Path) -> str:
    """What is wrong when ``binary`` (kube-apiserver) does not know some of the user's flags, or ""."""
    known = probe(binary)
    unknown = [name for name in _flag_names(extra_flags) if not known.accepts(name)]
    if not unknown:
        return ""
    return (
        f"kube-apiserver does not know the flag(s) {', '.join('--' + n for n in unknown)} "
        f"passed in apiserver_flags=. Remove or fix them (`{binary} --help` lists "
        "the flags this version accepts)."
    )


def check_extra_flags(extra_flags: Sequence[str] | Mapping[str, str | None], binary: Path) -> None:
    """ControlPlaneError unless every extra flag is well formed and known to ``binary``: checked
    before any process starts, so a typo costs no etcd start and leaves nothing behind."""
    merge_flags({}, extra_flags)  # '--name=value' in a list, or a mapping
    problem = _unknown_flags_problem(extra_flags, binary) if extra_flags else ""
    if problem:
        raise ControlPlaneError(problem)


def rejected_flags_hint(extra_flags: Sequence[str] | Mapping[str, str | None], binary: Path, log: str) -> str:
    """Point at the user's extra flag when the API server (``binary``) exited with ``log``."""
    given = _flag_names(extra_flags)
    unknown = _unknown_flags_problem(extra_flags, binary)  # an upgrade's binary may know fewer
    if unknown:
        return unknown
    if given and ("unknown flag" in log or "invalid argument" in log or "Error:" in log):
        return (
            "Check the extra flags passed in apiserver_flags= "
            f"({', '.join('--' + n for n in given)}): the log above says why they were rejected."
        )
    return ""


def write_audit_policy(directory: Path) -> tuple[Path, Path]:
    """The Metadata-level audit policy (written in ``directory`` once) and the audit log's path."""
    policy = directory / "audit-policy.yaml"
    if not policy.exists():
        write_private_file(policy, AUDIT_POLICY)
    return policy, directory / "audit.log"


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
    if files.admission_config is not None:
        flags[ADMISSION_CONFIG_FLAG] = str(files.admission_config)
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
    return ManagedProcess("kube-apiserver", [str(binary), *arguments], log_path, env=component_environment())


class ApiServerClient:
    """Minimal authenticated HTTPS GETs for readiness checks (no client library needed)."""

    def __init__(self, port: int, ca_cert: Path, client_cert: Path, client_key: Path) -> None:
        self.port = port
        self._context = ssl.create_default_context(cafile=str(ca_cert))
        self._context.load_cert_chain(str(client_cert), str(client_key))

    def get(
        self, path: str, timeout: float = 2.0, headers: Mapping[str, str] | None = None
    ) -> tuple[int, bytes]:
        """(status, body); status 0 when the server cannot be reached."""
        return self.request("GET", path, timeout, headers)

    def request(
        self,
        method: str,
        path: str,
        timeout: float = 2.0,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
    ) -> tuple[int, bytes]:
        """(status, body); status 0 when the server cannot be reached."""
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self._context, timeout=timeout
        )
        try:
            connection.request(method, path, body=body, headers=dict(headers or {}))
            response = connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            return 0, b""
        finally:
            connection.close()

    def ready(self, bootstrap: Mapping[str, Collection[str]] | None = None) -> bool:
        """``/readyz`` is 200, the ``default`` namespace and the ``kubernetes`` Service exist, and
        a Service gets a cluster IP.

        With ``bootstrap`` (the objects an etcd template holds, see :func:`bootstrap_objects`):
        ``/readyz`` without the :data:`BOOTSTRAP_HOOKS` checks is 200 and every one of those
        objects is served. The hooks wait a fixed second before their first attempt, and on
        data that already holds their objects they have nothing left to do.

        No ``/readyz`` check covers the cluster IP allocator: it learns the ServiceCIDRs from
        an informer, and until then every Service create fails with 500 "range is full". Nor
        does one cover the ``kubernetes`` Service, which a controller of the API server creates
        after ``/readyz`` passes: until then a test's Service could take its address."""
        if bootstrap is None:
            serving = self.get("/readyz")[0] == 200 and self.get("/api/v1/namespaces/default")[0] == 200
        else:
            serving = self.get(READYZ_WITHOUT_BOOTSTRAP_HOOKS)[0] == 200
            serving = serving and not self.missing_bootstrap_objects(bootstrap)
        serving = serving and self.get(f"{_SERVICES}/kubernetes")[0] == 200
        return serving and self.service_ip_problem() is None

    def service_ip_problem(self) -> str | None:
        """Why a Service cannot get a cluster IP now (None: it can), shown by creating one.

        A dry run proves nothing here: it does not allocate. The probe has a fixed name so
        that one left behind (its delete failed) is found and deleted by the next call."""
        status, body = self.request(
            "POST", _SERVICES, timeout=5.0, headers=_JSON, body=json.dumps(_PROBE_SERVICE).encode()
        )
        deleted, _ = self.request("DELETE", f"{_SERVICES}/{_PROBE_NAME}", timeout=5.0)
        if status != 201:
            return f"creating a Service was refused ({_status_text(status, body)})"
        if deleted not in (200, 404):
            return f"the readiness probe Service {_PROBE_NAME} could not be deleted (status {deleted})"
        return None

    def point_kubernetes_service_here(self) -> str | None:
        """Point the ``kubernetes`` Service at this API server's port; why it failed, or None.

        A Service restored from an etcd template names the port of the API server that
        bootstrapped it, which corrects an existing Service only a second or so later."""
        patch = {"spec": {"ports": [{"port": 443, "targetPort": self.port}]}}
        status, body = self.request(
            "PATCH",
            f"{_SERVICES}/kubernetes",
            timeout=5.0,
            headers={"Content-Type": "application/strategic-merge-patch+json"},
            body=json.dumps(patch).encode(),
        )
        if status != 200:
            return f"the kubernetes Service could not be updated ({_status_text(status, body)})"
        return None

    def bootstrap_objects(self) -> dict[str, list[str]] | None:
        """The names (``namespace/name``) of the objects of each :data:`BOOTSTRAP_LISTS` kind
        this API server serves; None when a list fails."""
        found: dict[str, list[str]] = {}
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self._context, timeout=10.0)
        try:  # one connection for all of them: a TLS handshake costs more than a list
            for kind, path in BOOTSTRAP_LISTS.items():
                connection.request("GET", path, headers=_METADATA_ONLY)
                response = connection.getresponse()
                body = response.read()
                if response.status != 200:
                    return None
                items = json.loads(body)["items"]
                found[kind] = sorted(
                    f"{item['metadata'].get('namespace', '')}/{item['metadata']['name']}" for item in items
                )
        except (OSError, http.client.HTTPException, ValueError, KeyError, TypeError):
            return None
        finally:
            connection.close()
        return found

    def missing_bootstrap_objects(self, bootstrap: Mapping[str, Collection[str]]) -> list[str]:
        """Which of ``bootstrap`` (kind -> ``namespace/name``) this API server does not serve;
        a kind it cannot list counts as missing."""
        served = self.bootstrap_objects()
        missing = []
        for kind, names in sorted(bootstrap.items()):
            if served is None or kind not in served:
                missing.append(f"{kind} (cannot list them)")
                continue
            missing.extend(f"{kind} {name}" for name in sorted(set(names) - set(served[kind])))
        return missing

    def version(self) -> dict[str, str]:
        status, body = self.get("/version")
        if status != 200:
            return {}
        try:
            data = json.loads(body)
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}


def wait_until_ready(
    client: ApiServerClient,
    bootstrap: Mapping[str, Collection[str]] | None,
    *,
    timeout: float,
    etcd: ManagedProcess,
    apiserver: ManagedProcess,
    on_exit: Callable[[ManagedProcess], None],
    etcd_healthy: Callable[[], bool],
) -> None:
    """Poll :meth:`ApiServerClient.ready` every 20 ms; ``on_exit(process)`` raises when etcd or
    the API server exits. After ``timeout`` seconds: ControlPlaneError saying what is missing."""
    deadline = time.monotonic() + timeout
    while True:
        for process in (etcd, apiserver):
            if not process.running:
                on_exit(process)
        if client.ready(bootstrap):
            return
        if time.monotonic() > deadline:
            etcd_state = "healthy" if etcd_healthy() else "NOT healthy"
            if bootstrap is not None:
                missing = client.missing_bootstrap_objects(bootstrap)
                if missing:
                    listed = ", ".join(missing[:10])
                    etcd_state += f"; bootstrap objects of the etcd template not served: {listed}"
            problem = client.service_ip_problem()
            if problem is not None:
                etcd_state += f"; a Service cannot get a cluster IP: {problem}"
            raise apiserver.failure(
                f"was not ready after {timeout:.0f} s (etcd is {etcd_state})",
                "Raise start_timeout= if this machine is very busy, or look at the log above.",
            )
        time.sleep(0.02)


def served_version(client: ApiServerClient, fallback: str) -> str:
    """The API server's version (``1.37.2``); ``fallback`` (the binaries' version) for a binary
    built without version stamping, which reports v0.0.0-master+$Format$."""
    from ktest.assets.selectors import KubeVersion

    reported = client.version().get("gitVersion", "")
    with contextlib.suppress(AssetsError):
        stamped = KubeVersion.parse(reported)
        if stamped.patch is not None and (stamped.major, stamped.minor) != (0, 0):
            return stamped.text
    return fallback or str(reported).removeprefix("v")


def _status_text(status: int, body: bytes) -> str:
    """``status 500: <the Status message>``, or the start of the body."""
    if status == 0:
        return "no answer"
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        message = None
    return f"status {status}: {message or body[:300]!r}"
