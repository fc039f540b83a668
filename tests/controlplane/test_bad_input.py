"""Bad input gets a clear error, and leaves no process or directory behind."""

from __future__ import annotations

import dataclasses
import os
import shutil
import warnings
from collections.abc import Iterator
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


def _failed_start(assets: Assets, root: Path, flag: str) -> tuple[ControlPlane, str]:
    """A plane without controllers started with the API server flag ``flag``, and why it failed."""
    plane = ControlPlane(assets=assets, controllers="none", apiserver_flags=[flag], root_directory=root)
    with pytest.raises(ControlPlaneError) as failure:
        plane.start()
    return plane, str(failure.value)


def test_an_unknown_apiserver_flag_is_refused_before_anything_starts(assets: Assets, tmp_path: Path) -> None:
    """Checked against the binary's own --help: a typo costs no etcd start and leaves nothing."""
    plane, message = _failed_start(assets, tmp_path, "--no-such-flag=1")
    assert "kube-apiserver does not know the flag(s) --no-such-flag passed in apiserver_flags=" in message
    assert "kube-apiserver --help` lists the flags this version accepts" in message
    assert "exited during start" not in message and "Command:" not in message, message  # no process ran
    assert list(tmp_path.iterdir()) == []  # no run directory: nothing was started
    assert not plane.running


def test_a_flag_value_the_api_server_rejects_shows_the_log_tail(assets: Assets, tmp_path: Path) -> None:
    plane, message = _failed_start(assets, tmp_path, "--min-request-timeout=soon")
    assert "kube-apiserver exited during start" in message
    assert "Command: " in message and "--min-request-timeout=soon" in message
    assert "exit status" in message
    assert "last lines of the log" in message
    assert 'invalid argument "soon"' in message  # the binary's own words, from its log
    assert "Check the extra flags passed in apiserver_flags= (--min-request-timeout)" in message
    assert not plane.directory.exists()
    assert live_processes_using(plane.directory) == []
    assert not plane.running


@dataclasses.dataclass
class Kept:
    """A plane with ``controllers="none"``, ``keep_directory=True`` and flags of the user's, as
    seen while it ran (started and stopped with warnings as errors)."""

    plane: ControlPlane
    controllers: frozenset[str]
    components: set[str]
    pids: list[int | None]
    apiserver_command: list[str]
    pod_rejection: kubernetes.client.ApiException | None


KEPT = pytest.mark.xdist_group("bad-input-kept-plane")  # one worker starts it


@pytest.fixture(scope="module")
def kept(assets: Assets) -> Iterator[Kept]:
    """One plane for two unrelated settings: the user's API server flags (enabling the
    ServiceAccount admission plugin) and a directory kept after stop."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ControlPlane(
            assets=assets,
            controllers="none",
            keep_directory=True,
            apiserver_flags={"disable-admission-plugins": "", "feature-gates": "AllAlpha=false"},
        ) as plane:
            core = kubernetes.client.CoreV1Api(client_for(plane.kubeconfig))
            core.create_namespace({"metadata": {"name": "fresh"}})
            pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
            rejection = None
            try:
                core.create_namespaced_pod("fresh", pod)
            except kubernetes.client.ApiException as error:
                rejection = error
            seen = Kept(
                plane, plane.controllers, set(plane.processes()), [p.pid for p in plane.processes().values()],
                list(plane.processes()["kube-apiserver"].command), rejection,
            )
    try:
        yield seen
    finally:
        shutil.rmtree(plane.directory)


@KEPT
@pytest.mark.slow
def test_user_flags_replace_defaults(kept: Kept) -> None:
    """A flag the user gives replaces ktest's value: here, enabling the ServiceAccount plugin."""
    command = kept.apiserver_command
    assert "--disable-admission-plugins=" in command
    assert "--disable-admission-plugins=ServiceAccount" not in command
    assert "--feature-gates=AllAlpha=false" in command
    # With the ServiceAccount plugin on and no serviceaccount controller, the
    # missing default ServiceAccount is rejected: ktest's default avoids this.
    assert kept.pod_rejection is not None, "a Pod without its namespace's default ServiceAccount was admitted"
    assert "serviceaccount" in kept.pod_rejection.body.lower()


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


@KEPT
def test_controllers_none_and_keep_directory(kept: Kept) -> None:
    """No warning (the fixture turns them into errors), no kube-controller-manager."""
    assert kept.controllers == frozenset()
    assert "kube-controller-manager" not in kept.components
    # Stopped, but the logs are kept for debugging.
    plane = kept.plane
    assert plane.log_path("kube-apiserver").stat().st_size > 0
    assert not [pid for pid in kept.pids if pid and process_alive(pid)]
    assert live_processes_using(plane.directory) == []


def test_properties_before_start_explain_themselves() -> None:
    plane = ControlPlane()
    with pytest.raises(ControlPlaneError, match="start"):
        _ = plane.kubeconfig
    with pytest.raises(ControlPlaneError, match="start"):
        plane.add_user("x")
