"""``wait_for_controllers=False``: ``start()`` returns once the API server is ready and
kube-controller-manager is launched; :meth:`wait_until_controllers_ready` waits for it.
The pytest plugin starts the bare backend that way and waits before each test body
(tests/plugin/test_plugin_controllers_gate.py). The start-up gate's own tests:
test_startup_gate.py; how kube-controller-manager runs behind it in a plane is checked here, on
the same planes (the gate works alike whether start() waits for the controllers or not)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import yaml
from controlplane_helpers import assert_collects_garbage
from processes import live_processes_using, tcp_sockets

from ktest.assets import Assets
from ktest.controlplane import ControlPlane
from ktest.controlplane.controller_manager import ready_markers
from ktest.errors import ControlPlaneError
from ktest.wait import consistently, eventually

GATE_KUBECONFIG = "kube-controller-manager.kubeconfig"


def _gate_port(plane: ControlPlane) -> int:
    config = yaml.safe_load((plane.directory / GATE_KUBECONFIG).read_text())
    return int(config["clusters"][0]["cluster"]["server"].rsplit(":", 1)[1])


def _peer_ports(pid: int) -> set[int]:
    """The remote ports of the TCP connections process ``pid`` holds."""
    return {int(remote.rsplit(":", 1)[1], 16) for _table, _local, remote, _state in tcp_sockets(pid)}


def _refused(port: int) -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def _log_size(plane: ControlPlane) -> int:
    return plane.log_path("kube-controller-manager").stat().st_size


def _controllers_running(plane: ControlPlane, since: int = 0) -> bool:
    """Whether kube-controller-manager's log (appended to across restarts) says, after byte
    ``since``, that every controller of the plane runs."""
    log = plane.log_path("kube-controller-manager").read_bytes()[since:]
    return all(marker in log for marker in ready_markers(plane.controllers))


@pytest.fixture(params=[True, False], ids=["template", "no-template"])
def deferred(k8s_assets: Assets, request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """On etcd-template data and without: the start-up gate opens when the plane is ready,
    with or without the bootstrap hooks' second."""
    with ControlPlane(assets=k8s_assets, wait_for_controllers=False, etcd_template=request.param) as plane:
        yield plane


def test_the_wait_confirms_the_controllers_they_work_and_restarts_wait_too(deferred: ControlPlane) -> None:
    """And kube-controller-manager runs behind the start-up gate from its launch, a restart
    uses a new gate and closes the old one, and a stop closes the last."""
    assert deferred.controllers == {"garbagecollector", "namespace"}
    deferred.wait_until_controllers_ready()
    assert _controllers_running(deferred)
    assert_collects_garbage(deferred.kubeconfig, "deferred")
    pid = deferred.processes()["kube-controller-manager"].pid
    assert pid is not None
    peers = _peer_ports(pid)
    first = _gate_port(deferred)
    assert first in peers
    assert int(deferred.server.rsplit(":", 1)[1]) not in peers  # all its traffic is relayed
    # It never saw the API server unhealthy: the gate held its first /healthz until the
    # plane was ready (without the template, bootstrap hooks included).
    assert "isn't healthy yet" not in deferred.log_path("kube-controller-manager").read_text()

    # once waited for, a restart waits for the controllers too: the new process's lines say so
    before_restart = _log_size(deferred)
    deferred.restart_controllers()
    assert _controllers_running(deferred, since=before_restart)
    second = _gate_port(deferred)
    assert second != first
    _refused(first)
    assert_collects_garbage(deferred.kubeconfig, "restarted")
    deferred.stop()  # the fixture's stop then does nothing
    _refused(second)


def test_the_wait_names_a_controller_manager_that_died(k8s_assets: Assets) -> None:
    """On template data only: the wait's death check (``ManagedProcess.wait_until`` through
    ``ControllerManager.wait_until_running``) runs after start() alike on either data; what the
    template changes, how start() decides the API server is ready before the gate opens, the
    first test checks on both (a death before the first wait needs a start of its own)."""
    with ControlPlane(assets=k8s_assets, wait_for_controllers=False) as plane:
        eventually(lambda: "kube-controller-manager" in plane.processes(), timeout=30)
        plane.processes()["kube-controller-manager"].kill()
        with pytest.raises(ControlPlaneError, match="kube-controller-manager") as raised:
            plane.wait_until_controllers_ready()
        assert "exited before it was running its controllers" in str(raised.value)


@pytest.mark.parametrize("template", [True, False], ids=["template", "no-template"])
def test_a_stop_right_after_start_leaves_no_controller_manager(k8s_assets: Assets, template: bool) -> None:
    plane = ControlPlane(assets=k8s_assets, wait_for_controllers=False, etcd_template=template).start()
    directory = plane.directory
    plane.stop()  # kube-controller-manager may still be starting
    assert plane.processes() == {}
    consistently(
        lambda: not live_processes_using(directory),
        duration=2,
        description="no kube-controller-manager launched after stop()",
    )
