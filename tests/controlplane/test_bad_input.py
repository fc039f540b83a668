"""Bad input gets a clear error, and leaves no process or directory behind."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import kubernetes
import pytest
from controlplane_helpers import client_for
from processes import live_processes_using

from ktest.assets.bundle import Assets
from ktest.base.procfs import process_alive
from ktest.controlplane import ControlPlane
from ktest.errors import AssetsError, ControlPlaneError


def _own_directories(root: Path) -> set[Path]:
    return {p for p in root.glob(f"ktest-cp-{os.getpid()}-*")}


def test_unknown_apiserver_flag_shows_the_log_tail(assets: Assets, tmp_path: Path) -> None:
    plane = ControlPlane(
        assets=assets,
        controllers="none",
        apiserver_flags=["--no-such-flag=1"],
        root_directory=tmp_path,
    )
    with pytest.raises(ControlPlaneError) as failure:
        plane.start()
    message = str(failure.value)
    assert "kube-apiserver exited during start" in message
    assert "Command: " in message and "--no-such-flag=1" in message
    assert "exit status" in message
    assert "last lines of the log" in message
    assert "unknown flag: --no-such-flag" in message  # the binary's own words, from its log
    assert "does not know the flag(s) --no-such-flag" in message
    assert not plane.directory.exists()
    assert live_processes_using(plane.directory) == []
    assert not plane.running


@pytest.mark.slow
def test_user_flags_replace_defaults(assets: Assets) -> None:
    """A flag the user gives replaces ktest's value: here, enabling the ServiceAccount plugin."""
    with ControlPlane(
        assets=assets,
        controllers="none",
        apiserver_flags={"disable-admission-plugins": "", "feature-gates": "AllAlpha=false"},
    ) as plane:
        command = plane.processes()["kube-apiserver"].command
        assert "--disable-admission-plugins=" in command
        assert "--disable-admission-plugins=ServiceAccount" not in command
        assert "--feature-gates=AllAlpha=false" in command
        core = kubernetes.client.CoreV1Api(client_for(plane.kubeconfig))
        core.create_namespace({"metadata": {"name": "fresh"}})
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        # With the ServiceAccount plugin on and no serviceaccount controller, the
        # missing default ServiceAccount is rejected: ktest's default avoids this.
        with pytest.raises(kubernetes.client.ApiException) as rejected:
            core.create_namespaced_pod("fresh", pod)
        assert "serviceaccount" in rejected.value.body.lower()


def test_reserved_flags_are_refused_up_front() -> None:
    with pytest.raises(ControlPlaneError, match="--secure-port"):
        ControlPlane(apiserver_flags=["--secure-port=6443"])


def test_missing_binary(assets: Assets, tmp_path: Path) -> None:
    (tmp_path / "etcd").symlink_to(assets.binary("etcd"))
    before = _own_directories(tmp_path)
    plane = ControlPlane(assets=tmp_path, root_directory=tmp_path)
    with pytest.raises(AssetsError, match="kube-apiserver"):
        plane.start()
    assert _own_directories(tmp_path) == before


def test_missing_assets_directory(tmp_path: Path) -> None:
    with pytest.raises(AssetsError, match="does not exist"):
        ControlPlane(assets=tmp_path / "nowhere").start()


def test_unknown_controller_name(assets: Assets, tmp_path: Path) -> None:
    if not assets.has("kube-controller-manager"):
        pytest.fail("this test needs kube-controller-manager in the assets")
    plane = ControlPlane(assets=assets, controllers=("garbagecollector", "bogus"), root_directory=tmp_path)
    with pytest.raises(ControlPlaneError) as failure:
        plane.start()
    message = str(failure.value)
    assert "'bogus'" in message
    assert "garbage-collector-controller" in message  # lists the names it knows
    assert list(tmp_path.iterdir()) == []  # refused before anything started


def test_without_controller_manager_binary_warns_and_runs(assets: Assets, tmp_path: Path) -> None:
    for name in ("etcd", "kube-apiserver"):
        (tmp_path / name).symlink_to(assets.binary(name))
    with pytest.warns(UserWarning, match="kube-controller-manager is not in"):
        plane = ControlPlane(assets=tmp_path).start()
    try:
        assert plane.controllers == frozenset()
        assert set(plane.processes()) == {"etcd", "kube-apiserver"}
    finally:
        plane.stop()


def test_controllers_none_and_keep_directory(assets: Assets) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ControlPlane(assets=assets, controllers="none", keep_directory=True) as plane:
            assert plane.controllers == frozenset()
            assert "kube-controller-manager" not in plane.processes()
            pids = [p.pid for p in plane.processes().values()]
    try:
        # Stopped, but the logs are kept for debugging.
        assert plane.log_path("kube-apiserver").stat().st_size > 0
        assert not [pid for pid in pids if pid and process_alive(pid)]
        assert live_processes_using(plane.directory) == []
    finally:
        shutil.rmtree(plane.directory)


def test_properties_before_start_explain_themselves() -> None:
    plane = ControlPlane()
    with pytest.raises(ControlPlaneError, match="start"):
        _ = plane.kubeconfig
    with pytest.raises(ControlPlaneError, match="start"):
        plane.add_user("x")
