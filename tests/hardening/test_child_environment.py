"""The test process's environment does not configure the control plane.

etcd reads every flag from ``ETCD_<FLAG>`` as well; with ``ETCD_LISTEN_METRICS_URLS``
in the environment, ktest's etcd opened an unauthenticated plain-HTTP listener. The
control plane's children get an environment without ``ETCD_*``, ``ETCDCTL_*``,
``KUBECONFIG``, ``KUBERNETES_*`` and ``KUBE_*``; everything else (PATH, HOME, ...) is kept."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hardening_helpers import listening_addresses

from ktest.assets.bundle import Assets
from ktest.base.ports import free_ports
from ktest.controlplane import ControlPlane

SCRUBBED = {
    "ETCDCTL_ENDPOINTS": "https://127.0.0.1:1",
    "KUBECONFIG": "/nonexistent/kubeconfig",
    "KUBERNETES_SERVICE_HOST": "10.9.9.9",
    "KUBERNETES_SERVICE_PORT": "443",
    "KUBE_FEATURE_WatchListClient": "false",
}
KEPT = {"KTEST_CHILD_ENV_MARKER": "kept"}


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (entry.decode("utf-8", "replace").partition("=") for entry in raw.split(b"\0") if entry)
    return {name: value for name, _, value in pairs}


POLLUTED = pytest.mark.xdist_group("child-environment-plane")  # one worker starts the module's plane


@pytest.fixture(scope="module")
def polluted(assets: Assets, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, int]]:
    """A control plane (with a controller) started while the environment holds etcd and kube settings.

    One for the module: its tests only read what its processes inherited at start and listen on."""
    (metrics_port,) = free_ports(1)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("ETCD_LISTEN_METRICS_URLS", f"http://127.0.0.1:{metrics_port}")
        for name, value in {**SCRUBBED, **KEPT}.items():
            monkeypatch.setenv(name, value)
        plane = ControlPlane(  # every component starts here, with this environment
            assets=assets, controllers="garbagecollector", root_directory=tmp_path_factory.mktemp("polluted")
        ).start()
    try:
        yield plane, metrics_port
    finally:
        plane.stop()


@POLLUTED
def test_etcd_opens_no_listener_from_the_environment(polluted: tuple[ControlPlane, int]) -> None:
    plane, metrics_port = polluted
    etcd = plane.processes()["etcd"]
    assert etcd.pid is not None
    ports = [port for _address, port in listening_addresses(etcd.pid)]
    assert ports, "positive control: etcd's own listeners are seen"
    assert metrics_port not in ports, f"etcd listens on the port from ETCD_LISTEN_METRICS_URLS: {ports}"
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", metrics_port), 2):
        pass


@POLLUTED
def test_no_component_sees_etcd_or_kube_variables(polluted: tuple[ControlPlane, int]) -> None:
    plane, _ = polluted
    processes = plane.processes()
    assert {"etcd", "kube-apiserver", "kube-controller-manager"} <= set(processes)
    for name, process in processes.items():
        if process is None or process.pid is None:
            continue
        environ = _environ(process.pid)
        leaked = sorted(variable for variable in environ if variable.startswith(("ETCD", "KUBE")))
        assert leaked == [], f"{name} inherited {leaked}"
        assert environ.get("KTEST_CHILD_ENV_MARKER") == "kept", f"{name} lost the rest of the environment"
        assert "PATH" in environ


def test_component_environment_keeps_the_rest() -> None:
    from ktest.base.process import component_environment

    base = {"PATH": "/bin", "HOME": "/root", "ETCD_DATA_DIR": "/x", "KUBECONFIG": "k", "KUBECTL_X": "y"}
    assert component_environment(base) == {"PATH": "/bin", "HOME": "/root", "KUBECTL_X": "y"}
