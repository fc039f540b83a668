"""``wait_for_controllers=False``: ``start()`` returns once the API server is ready and
kube-controller-manager is launched; :meth:`wait_until_controllers_ready` waits for it.
The pytest plugin starts the bare backend that way and waits before each test body
(tests/plugin/test_plugin_controllers_gate.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from builders import configmap, configmap_ref
from processes import live_processes_using

from ktest.assets import Assets
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.controlplane.controller_manager import ready_markers
from ktest.errors import ControlPlaneError
from ktest.wait import consistently, eventually


def _controllers_running(plane: ControlPlane) -> bool:
    log = plane.log_path("kube-controller-manager").read_bytes()
    return all(marker in log for marker in ready_markers(plane.controllers))


@pytest.fixture
def deferred(k8s_assets: Assets) -> Iterator[ControlPlane]:
    with ControlPlane(assets=k8s_assets, wait_for_controllers=False) as plane:
        yield plane


def test_start_returns_before_the_controllers_run_and_the_wait_confirms_them(
    deferred: ControlPlane,
) -> None:
    assert deferred.controllers == {"garbagecollector", "namespace"}
    # kube-controller-manager is launched once the API server's bootstrap hooks are done (a 1 s
    # timer): it cannot run its controllers by the time start() returned.
    assert "kube-controller-manager" not in deferred.processes() or not _controllers_running(deferred)
    deferred.wait_until_controllers_ready()
    assert _controllers_running(deferred)
    with Cluster(deferred.kubeconfig) as cluster, cluster.namespace(prefix="deferred") as ns:
        owner = cluster.create(configmap("owner", ns))
        cluster.create(configmap("child", ns, owner=owner))
        cluster.delete(configmap_ref("owner", ns))
        eventually(
            lambda: cluster.get_or_none(configmap_ref("child", ns)) is None,
            timeout=30,
            description="the garbage collector to delete the child",
        )


def test_the_wait_names_a_controller_manager_that_died(deferred: ControlPlane) -> None:
    eventually(lambda: "kube-controller-manager" in deferred.processes(), timeout=30)
    deferred.processes()["kube-controller-manager"].kill()
    with pytest.raises(ControlPlaneError, match="kube-controller-manager") as raised:
        deferred.wait_until_controllers_ready()
    assert "exited before it was running its controllers" in str(raised.value)


def test_once_waited_for_restarts_wait_for_the_controllers_too(deferred: ControlPlane) -> None:
    deferred.wait_until_controllers_ready()
    deferred.restart_controllers()
    assert _controllers_running(deferred)


def test_a_stop_before_the_deferred_launch_leaves_no_controller_manager(k8s_assets: Assets) -> None:
    plane = ControlPlane(assets=k8s_assets, wait_for_controllers=False).start()
    directory = plane.directory
    plane.stop()  # within the hooks' 1 s: the launch has not happened yet
    assert plane.processes() == {}
    consistently(
        lambda: not live_processes_using(directory),
        duration=2,
        description="no kube-controller-manager launched after stop()",
    )


def test_a_restart_before_the_deferred_launch_does_not_wait_for_it(k8s_assets: Assets) -> None:
    with ControlPlane(assets=k8s_assets, wait_for_controllers=False) as plane:
        plane.restart_controllers()  # CRDs installed meanwhile: the later launch will see them
        assert "kube-controller-manager" not in plane.processes()
        plane.wait_until_controllers_ready()
        assert _controllers_running(plane)
