"""Bad input gets a clear error, and leaves no process or directory behind."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING

import kubernetes
import pytest
from controlplane_helpers import client_for
from processes import live_processes_using

from ktest.assets.bundle import Assets
from ktest.base.procfs import process_alive
from ktest.controlplane import ControlPlane
from ktest.errors import AssetsError, ControlPlaneError

if TYPE_CHECKING:
    from startup_planes import Seen

pytest_plugins = ("startup_planes",)  # its planes, one for every module using them
USER_FLAGS_PLANE = pytest.mark.xdist_group("startup-user-flags-plane")  # one worker starts it
SELF_BOOTSTRAPPED_PLANE = pytest.mark.xdist_group("etcd-template-planes")  # with test_etcd_template's


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
    """What the shared ``user_flags_plane`` (startup_planes.py; ``controllers="none"``,
    ``keep_directory=True``, flags of the user's) showed while it ran."""

    controllers: frozenset[str]
    components: set[str]
    pids: list[int | None]
    apiserver_command: list[str]
    pod_rejection: kubernetes.client.ApiException | None


def _kept(plane: ControlPlane) -> Kept:
    """Its components, and whether a Pod is admitted in a fresh namespace."""
    core = kubernetes.client.CoreV1Api(client_for(plane.kubeconfig))
    core.create_namespace({"metadata": {"name": "fresh"}})
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    rejection = None
    try:
        core.create_namespaced_pod("fresh", pod)
    except kubernetes.client.ApiException as error:
        rejection = error
    return Kept(
        plane.controllers, set(plane.processes()), [p.pid for p in plane.processes().values()],
        list(plane.processes()["kube-apiserver"].command), rejection,
    )


def _components(plane: ControlPlane) -> tuple[frozenset[str], set[str]]:
    return plane.controllers, set(plane.processes())


SEEN_ON_USER_FLAGS_PLANE = (_kept,)
SEEN_ON_SELF_BOOTSTRAPPED_PLANE = (_components,)


@USER_FLAGS_PLANE
@pytest.mark.slow
def test_user_flags_replace_defaults(user_flags_plane: Seen) -> None:
    """A flag the user gives replaces ktest's value: here, enabling the ServiceAccount plugin."""
    kept: Kept = user_flags_plane.result(_kept)
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


@SELF_BOOTSTRAPPED_PLANE
def test_without_controller_manager_binary_warns_and_runs(self_bootstrapped_plane: Seen) -> None:
    """On the shared ``self_bootstrapped_plane`` (startup_planes.py): binaries without
    kube-controller-manager, the default controllers asked for."""
    warned = [str(w.message) for w in self_bootstrapped_plane.warned if issubclass(w.category, UserWarning)]
    assert [message for message in warned if "kube-controller-manager is not in" in message], warned
    controllers, components = self_bootstrapped_plane.result(_components)
    assert controllers == frozenset()
    assert components == {"etcd", "kube-apiserver"}


@USER_FLAGS_PLANE
def test_controllers_none_and_keep_directory(user_flags_plane: Seen) -> None:
    """No warning (the fixture turns them into errors), no kube-controller-manager."""
    kept: Kept = user_flags_plane.result(_kept)
    assert kept.controllers == frozenset()
    assert "kube-controller-manager" not in kept.components
    # Stopped, but the logs are kept for debugging.
    plane = user_flags_plane.plane
    assert plane.log_path("kube-apiserver").stat().st_size > 0
    assert not [pid for pid in kept.pids if pid and process_alive(pid)]
    assert live_processes_using(plane.directory) == []


def test_properties_before_start_explain_themselves() -> None:
    plane = ControlPlane()
    with pytest.raises(ControlPlaneError, match="start"):
        _ = plane.kubeconfig
    with pytest.raises(ControlPlaneError, match="start"):
        plane.add_user("x")
