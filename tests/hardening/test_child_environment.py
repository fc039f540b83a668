"""The test process's environment does not configure the control plane.

etcd reads every flag from ``ETCD_<FLAG>`` as well; with ``ETCD_LISTEN_METRICS_URLS``
in the environment, ktest's etcd opened an unauthenticated plain-HTTP listener. The
control plane's children get an environment without ``ETCD_*``, ``ETCDCTL_*``,
``KUBECONFIG``, ``KUBERNETES_*`` and ``KUBE_*``; everything else (PATH, HOME, ...) is kept."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hardening_helpers import listening_addresses

from ktest.base.ports import free_ports
from ktest.controlplane import ControlPlane

if TYPE_CHECKING:
    from hardening_starts import SharedStart

pytest_plugins = ("hardening_starts",)  # its plane, one for this module and test_shared_machine.py

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


def _pollute(_base: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The shared plane (hardening_starts.py; a controller too) starts while the environment holds
    etcd and kube settings; the port of ``ETCD_LISTEN_METRICS_URLS``."""
    (metrics_port,) = free_ports(1)
    monkeypatch.setenv("ETCD_LISTEN_METRICS_URLS", f"http://127.0.0.1:{metrics_port}")
    for name, value in {**SCRUBBED, **KEPT}.items():
        monkeypatch.setenv(name, value)
    return metrics_port


def _etcd_listeners(plane: ControlPlane, start: SharedStart) -> tuple[list[int], str]:
    """The ports etcd listens on, and how a connection to the metrics port of its environment ended."""
    etcd = plane.processes()["etcd"]
    assert etcd.pid is not None
    ports = [port for _address, port in listening_addresses(etcd.pid)]
    try:
        with socket.create_connection(("127.0.0.1", start.prepared(_pollute)), 2):
            return ports, "connected"
    except OSError as error:
        return ports, type(error).__name__


def _component_environments(plane: ControlPlane, _start: SharedStart) -> dict[str, dict[str, str] | None]:
    """Each component's environment, as it inherited it at start (None: not running)."""
    return {
        name: None if process is None or process.pid is None else _environ(process.pid)
        for name, process in plane.processes().items()
    }


PREPARE_HARDENING_START = (_pollute,)
SEEN_ON_HARDENING_START = (_etcd_listeners, _component_environments)
SHARED_START = pytest.mark.xdist_group("hardening-shared-start")  # hardening_starts.GROUP


@SHARED_START
def test_etcd_opens_no_listener_from_the_environment(hardening_start: SharedStart) -> None:
    ports, connection = hardening_start.result(_etcd_listeners)
    metrics_port = hardening_start.prepared(_pollute)
    assert ports, "positive control: etcd's own listeners are seen"
    assert metrics_port not in ports, f"etcd listens on the port from ETCD_LISTEN_METRICS_URLS: {ports}"
    assert connection == "ConnectionRefusedError", (
        f"connecting to the port from ETCD_LISTEN_METRICS_URLS while the plane ran: {connection}"
    )


@SHARED_START
def test_no_component_sees_etcd_or_kube_variables(hardening_start: SharedStart) -> None:
    environments = hardening_start.result(_component_environments)
    assert {"etcd", "kube-apiserver", "kube-controller-manager"} <= set(environments)
    for name, environ in environments.items():
        if environ is None:
            continue
        leaked = sorted(variable for variable in environ if variable.startswith(("ETCD", "KUBE")))
        assert leaked == [], f"{name} inherited {leaked}"
        assert environ.get("KTEST_CHILD_ENV_MARKER") == "kept", f"{name} lost the rest of the environment"
        assert "PATH" in environ


def test_component_environment_keeps_the_rest() -> None:
    from ktest.base.process import component_environment

    base = {"PATH": "/bin", "HOME": "/root", "ETCD_DATA_DIR": "/x", "KUBECONFIG": "k", "KUBECTL_X": "y"}
    assert component_environment(base) == {"PATH": "/bin", "HOME": "/root", "KUBECTL_X": "y"}
