"""The official client's process-wide defaults lead each in-process operator to its own proxy.

Operators in the wild call ``load_kube_config()`` / ``load_incluster_config()`` (at import
or in a startup handler) and then ``kubernetes.client.CoreV1Api()`` with no argument. In a
test process that must reach the test cluster through the operator's proxy, never the
developer's ``~/.kube/config``. The "developer's cluster" here is a TLS-less socket that
counts connections: it stands for a cluster outside the test, which must see none.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from builders import configmap, configmap_ref

from ktest.cluster import Cluster
from ktest.operators import OperatorContext, run_callable, run_kopf
from ktest.wait import eventually


class OutsideCluster:
    """A listening socket standing for a cluster outside the test: it only counts connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.connections = 0
        self.server = f"https://127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="outside-cluster", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def kubeconfig(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "dev", "cluster": {"server": self.server}}],
                    "users": [{"name": "dev", "user": {"token": "developer-token"}}],
                    "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": "dev"}}],
                    "current-context": "dev",
                }
            )
        )
        return path

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OutsideCluster]:
    """A developer's machine: KUBECONFIG, ~/.kube/config and the client's default all name
    a cluster outside the test, and the test process's own default client points there too."""
    cluster = OutsideCluster()
    kubeconfig = cluster.kubeconfig(tmp_path / "home" / ".kube" / "config")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig))
    previous = kubernetes.client.Configuration.get_default_copy()
    kubernetes.config.load_kube_config()  # the test process itself is configured for the developer's cluster
    try:
        yield cluster
    finally:
        kubernetes.client.Configuration.set_default(previous)
        cluster.close()


def copy_made(admin: Cluster, ns: str, name: str) -> None:
    assert admin.get(configmap_ref(f"{name}-copy", ns))["data"] == {"k": "v"}


@pytest.mark.parametrize(
    ("module", "label"),
    [
        ("sample_operators.kopf_default_client", "ktest.dev/default-client"),
        ("sample_operators.kopf_import_time_client", "ktest.dev/import-client"),
    ],
    ids=["startup-handler", "import-time"],
)
def test_kopf_operator_configuring_the_default_client_reaches_only_the_test_cluster(
    admin: Cluster, ns: str, outside: OutsideCluster, module: str, label: str
) -> None:
    with run_kopf(module, admin, namespaces=[ns]) as op:
        admin.create(configmap("a", ns, {"k": "v"}, labels={label: "true"}))
        eventually(lambda: copy_made(admin, ns, "a"))
        # The copy can be visible to the admin client a moment before the proxy records the answer.
        eventually(lambda: [(call.request.name, call.status) for call in op.traffic.calls(
            verb="create", resource="configmaps", namespace=ns)] == [("a-copy", 201)])
        assert "loads the test cluster through ktest's proxy" in op.logs
    assert outside.connections == 0
    assert kubernetes.client.Configuration.get_default_copy().host == outside.server


@pytest.mark.slow
def test_a_callable_that_loads_a_named_kubeconfig_or_in_cluster_config_cannot_leave_the_test(
    admin: Cluster, ns: str, outside: OutsideCluster, tmp_path: Path
) -> None:
    named = outside.kubeconfig(tmp_path / "prod.yaml")
    seen: dict[str, Any] = {}

    def operator(ctx: OperatorContext) -> None:
        kubernetes.config.load_kube_config(config_file=str(named), context="dev")
        kubernetes.client.CoreV1Api().create_namespaced_config_map(ns, {"metadata": {"name": "named"}})
        kubernetes.config.load_incluster_config()
        api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient())
        api.create_namespaced_config_map(ns, {"metadata": {"name": "incluster"}})
        explicit = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(client_configuration=explicit)
        seen["explicit host"] = explicit.host
        seen["KUBECONFIG"] = subprocess.run(
            ["sh", "-c", 'echo "$KUBECONFIG"'], capture_output=True, text=True, check=True
        ).stdout.strip()
        ctx.ready()
        ctx.stop.wait()

    with run_callable(operator, admin) as op:
        assert len(op.traffic.calls(verb="create", resource="configmaps", namespace=ns)) == 2
        assert seen["explicit host"] == op.api_cluster.server
        assert seen["KUBECONFIG"] == str(op.api_cluster.kubeconfig)
    admin.get(configmap_ref("named", ns))
    admin.get(configmap_ref("incluster", ns))
    assert outside.connections == 0


@pytest.mark.slow
def test_two_operators_in_one_process_each_get_their_own_defaults(admin: Cluster, ns: str) -> None:
    go = threading.Event()

    def operator(ctx: OperatorContext) -> None:
        kubernetes.config.load_kube_config()
        ctx.ready()
        go.wait()
        for number in range(5):  # interleaved with the other operator's calls
            api = kubernetes.client.CoreV1Api()
            api.create_namespaced_config_map(ns, {"metadata": {"name": f"{ctx.name}-{number}"}})
        ctx.stop.wait()

    with run_callable(operator, admin, name="first") as first, run_callable(
        operator, admin, name="second"
    ) as second:
        go.set()
        for op in (first, second):
            for number in range(5):
                eventually(lambda op=op, number=number: admin.get(configmap_ref(f"{op.name}-{number}", ns)))
        assert len(first.traffic.calls(verb="create", resource="configmaps")) == 5
        assert len(second.traffic.calls(verb="create", resource="configmaps")) == 5


@pytest.mark.slow
def test_the_test_process_keeps_its_own_defaults_while_and_after_operators_run(
    admin: Cluster, ns: str, outside: OutsideCluster
) -> None:
    import os

    before_env = os.environ["KUBECONFIG"]

    def operator(ctx: OperatorContext) -> None:
        ctx.ready()
        ctx.stop.wait()

    with run_callable(operator, admin) as op:
        assert os.environ["KUBECONFIG"] == before_env
        assert kubernetes.client.Configuration.get_default_copy().host == outside.server
        assert str(op.api_cluster.kubeconfig) != before_env
    shell = subprocess.run(["sh", "-c", 'echo "$KUBECONFIG"'], capture_output=True, text=True, check=True)
    assert shell.stdout.strip() == before_env
    assert type(os.environ).__name__ == "_Environ"
    assert kubernetes.client.Configuration.get_default_copy().host == outside.server
