"""In-place control-plane upgrades (ControlPlane.upgrade): the previous minor to the session's,
on the same etcd, port and certificates, with operators running through it; the refusals that
leave the plane as it was; the assertions of ktest.plane_upgrade.assertions, passing and failing.

Three operators (kopf, a subprocess, one that never reconnects) run through one upgrade of the
module's plane, each in its own namespace and behind its own proxy (the assertions read each one's
traffic alone); the rolled-back upgrade runs on the session's never-upgraded older plane
(upgrade_planes.py), which test_versions.py uses too."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import pytest
from bare_wiring import plane_cluster
from builders import configmap, configmap_ref
from upgrade_planes import REFUSED_BY, REMOVED_IN, Removed, never_upgraded_plane, no_reconnect_operator

from ktest.assertions import (
    ObjectSnapshot,
    assert_no_removed_api_calls,
    assert_objects_intact,
    assert_recovered_after_upgrade,
    snapshot_objects,
)
from ktest.assets import Assets, resolve_assets
from ktest.assets.minors import MINORS
from ktest.assets.selectors import KubeVersion
from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane
from ktest.controlplane.upgrade_report import UpgradeReport
from ktest.errors import ControlPlaneError
from ktest.operators import OperatorHandle, ProcessOperator, run_callable, run_kopf, run_subprocess
from ktest.plane_upgrade.upgrade import plan_upgrade
from ktest.wait import eventually

SAMPLES = Path(__file__).resolve().parent.parent / "operators" / "sample_operators"
MIRROR = {"ktest.dev/kopf-copy": "true"}
COPY = {"ktest.dev/copy": "true"}
CONFIG_MAPS = ("v1", "ConfigMap")
Handle = TypeVar("Handle", bound=OperatorHandle)
HANDLED = "kopf.zalando.org/last-handled-configuration"  # kopf's last write of an object it handled


def previous_minor(version: str) -> str:
    parsed = KubeVersion.parse(version)
    return f"{parsed.major}.{parsed.minor - 1}"


def removed_by(k8s_assets: Assets) -> Removed:
    """The API the session's minor removed (every minor ktest can upgrade to has one: checked below)."""
    return REMOVED_IN[KubeVersion.parse(k8s_assets.version).minor_text]


@pytest.fixture(scope="module")
def older_assets(k8s_assets: Assets) -> Assets:
    """The binaries of the minor before the session's (make test installs them)."""
    older = previous_minor(k8s_assets.version)
    if older not in MINORS:
        pytest.skip(f"{k8s_assets.version} is the oldest supported minor: none to upgrade from")
    return resolve_assets(older)


@pytest.fixture(scope="module")
def older_plane(older_assets: Assets, k8s_assets: Assets) -> Iterator[ControlPlane]:
    """The module's plane, one minor before the session's, serving the API the session's minor
    removed; ``upgrade`` upgrades it once, under every operator of the module."""
    with ControlPlane(assets=older_assets, apiserver_flags=list(removed_by(k8s_assets).flags)) as cp:
        yield cp


@dataclass(frozen=True)
class Running(Generic[Handle]):
    """An operator started on ``older_plane`` before the upgrade: its Cluster, namespace, handle,
    its pid then, and the ConfigMaps of its namespace once it had reconciled them."""

    cluster: Cluster
    namespace: str
    op: Handle
    pid: int | None = None
    before: ObjectSnapshot | None = None


@pytest.fixture(scope="module")
def kopf_mirror(older_plane: ControlPlane) -> Iterator[Running[OperatorHandle]]:
    """kopf_mirror.py, having mirrored ConfigMap "before" (kopf's retries of the requests the upgrade
    cuts pass once they succeed: fail_on_errors on)."""
    with ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.syspath_prepend(str(SAMPLES.parent))
        cluster = stack.enter_context(plane_cluster(older_plane, "upgraded"))
        ns = stack.enter_context(cluster.namespace(prefix="upgrade"))
        op = stack.enter_context(run_kopf(SAMPLES / "kopf_mirror.py", cluster, namespaces=[ns]))
        cluster.create(configmap("before", ns, {"k": "v"}, labels=MIRROR))
        eventually(lambda: cluster.get(configmap_ref("before-kopf", ns))["data"] == {"k": "v"})
        eventually(lambda: HANDLED in cluster.get(configmap_ref("before", ns))["metadata"]["annotations"])
        yield Running(cluster, ns, op, before=snapshot_objects(cluster, CONFIG_MAPS, namespace=ns))


@pytest.fixture(scope="module")
def subprocess_copier(older_plane: ControlPlane) -> Iterator[Running[ProcessOperator]]:
    """upgrade_subprocess_operator.py, a process of its own, having copied ConfigMap "before"."""
    program = [sys.executable, str(Path(__file__).with_name("upgrade_subprocess_operator.py"))]
    with (
        plane_cluster(older_plane, "subprocess") as cluster,
        cluster.namespace(prefix="upgrade") as ns,
        run_subprocess(program, cluster, args=[ns], ready_log="watching configmaps") as op,
    ):
        cluster.create(configmap("before", ns, {"k": "v"}, labels=COPY))
        eventually(lambda: cluster.get(configmap_ref("before-copy", ns))["data"] == {"k": "v"})
        before = snapshot_objects(cluster, CONFIG_MAPS, namespace=ns)
        yield Running(cluster, ns, op, pid=op.pid, before=before)


@pytest.fixture(scope="module")
def no_reconnect(older_plane: ControlPlane, k8s_assets: Assets) -> Iterator[Running[OperatorHandle]]:
    """The operator that calls the removed API and gives up on its watch of ConfigMaps in default."""
    with (
        plane_cluster(older_plane, "removed-api") as cluster,
        run_callable(no_reconnect_operator(removed_by(k8s_assets)), cluster, name="no-reconnect") as op,
    ):
        yield Running(cluster, "default", op)


@dataclass(frozen=True)
class Upgrade:
    """The module's one upgrade: its report, and the plane's version, etcd pid and address before."""

    report: UpgradeReport
    old_version: str
    etcd_pid: int | None
    server: str


@pytest.fixture(scope="module")
def upgrade(
    older_plane: ControlPlane,
    k8s_assets: Assets,
    kopf_mirror: Running[OperatorHandle],
    subprocess_copier: Running[ProcessOperator],
    no_reconnect: Running[OperatorHandle],
) -> Upgrade:
    """``older_plane`` upgraded to the session's minor with the three operators running."""
    old_version, etcd_pid = older_plane.version, older_plane.processes()["etcd"].pid
    server = older_plane.server
    return Upgrade(older_plane.upgrade(k8s_assets.version), old_version, etcd_pid, server)


def served_version(cluster: Cluster) -> str:
    """What the API server answers now (``cluster.version`` is read once per Cluster)."""
    return KubeVersion.parse(cluster.rest.request("GET", "/version")["gitVersion"]).text


def pids(cp: ControlPlane) -> dict[str, int | None]:
    return {name: process.pid for name, process in cp.processes().items()}


def test_a_kopf_operator_runs_through_an_upgrade_to_the_next_minor_with_its_objects_intact(
    older_plane: ControlPlane, k8s_assets: Assets, kopf_mirror: Running[OperatorHandle], upgrade: Upgrade
) -> None:
    cluster, ns, op, report = kopf_mirror.cluster, kopf_mirror.namespace, kopf_mirror.op, upgrade.report
    assert kopf_mirror.before is not None
    assert (report.from_version, report.to_version) == (upgrade.old_version, k8s_assets.version)
    assert older_plane.version == k8s_assets.version
    assert served_version(cluster) == k8s_assets.version
    # the same etcd process, port and certificates: only the API server and controllers changed
    assert older_plane.processes()["etcd"].pid == upgrade.etcd_pid and older_plane.server == upgrade.server
    assert_objects_intact(cluster, kopf_mirror.before)
    assert_recovered_after_upgrade(op, report, window=1.0)
    assert_no_removed_api_calls(op, report)
    # the operator reconciles what changes after the upgrade
    cluster.create(configmap("after", ns, {"k": "new"}, labels=MIRROR))
    eventually(lambda: cluster.get(configmap_ref("after-kopf", ns))["data"] == {"k": "new"})


def test_a_subprocess_operator_reconnects_to_the_same_address_after_the_upgrade(
    subprocess_copier: Running[ProcessOperator], upgrade: Upgrade
) -> None:
    cluster, ns, op = subprocess_copier.cluster, subprocess_copier.namespace, subprocess_copier.op
    assert subprocess_copier.before is not None
    assert op.alive and op.pid == subprocess_copier.pid  # the same process, never restarted
    assert_objects_intact(cluster, subprocess_copier.before)
    assert_recovered_after_upgrade(op, upgrade.report, window=1.0)
    cluster.create(configmap("after", ns, {"k": "new"}, labels=COPY))
    eventually(lambda: cluster.get(configmap_ref("after-copy", ns))["data"] == {"k": "new"})


def test_the_upgrade_assertions_name_an_operator_that_did_not_reconnect_and_the_removed_api_it_calls(
    k8s_assets: Assets, no_reconnect: Running[OperatorHandle], upgrade: Upgrade
) -> None:
    removed, report, op = removed_by(k8s_assets), upgrade.report, no_reconnect.op
    api, group_version = removed.api, removed.api.group_version
    assert api in report.removed_apis, report.describe()
    with pytest.raises(AssertionError) as not_reconnected:
        assert_recovered_after_upgrade(op, report, timeout=3.0)
    with pytest.raises(AssertionError) as calls_removed:
        assert_no_removed_api_calls(op, report)
    message = str(not_reconnected.value)
    assert "operator 'no-reconnect' did not reconnect after the control-plane upgrade" in message
    assert "never re-opened its watch of configmaps in default" in message
    message = str(calls_removed.value)
    verb = "list" if removed.create is None else "create"
    assert f"Kubernetes {report.to_version} no longer serves: {api.resource} ({group_version})" in message
    assert f"{verb} {api.resource} ({group_version}): 1 request, 0 after the upgrade" in message
    assert f"serves {api.resource} as {removed.successor}" in message


def test_every_minor_ktest_can_upgrade_to_has_a_removed_api_and_a_refused_flag() -> None:
    """The two tests above run in every cell of the version matrix, instead of skipping."""
    targets = {minor for minor in MINORS if previous_minor(minor) in MINORS}
    assert targets, MINORS
    assert not targets - set(REMOVED_IN), f"add an API removed in {sorted(targets - set(REMOVED_IN))}"
    assert not targets - set(REFUSED_BY), f"add a flag refused by {sorted(targets - set(REFUSED_BY))}"


@pytest.fixture(scope="session")
def rollback_plane(request: pytest.FixtureRequest, k8s_assets: Assets) -> ControlPlane:
    """The session's never-upgraded plane one minor before the session's (upgrade_planes.py): it runs
    with the flag the session's minor refuses, so an upgrade of it fails and rolls back."""
    older = previous_minor(k8s_assets.version)
    if older not in MINORS:
        pytest.skip(f"{k8s_assets.version} is the oldest supported minor: none to upgrade from")
    return never_upgraded_plane(request, resolve_assets(older))


def test_a_target_that_does_not_start_brings_the_old_minor_back_on_the_same_data(
    rollback_plane: ControlPlane, older_assets: Assets, k8s_assets: Assets
) -> None:
    cp = rollback_plane
    target = KubeVersion.parse(k8s_assets.version).minor_text
    flag = REFUSED_BY[target]  # every minor ktest can upgrade to has one (checked above)
    gate = flag.removeprefix("--feature-gates=").split("=")[0]
    assert cp.version == older_assets.version
    with (
        plane_cluster(cp, "rollback") as cluster,
        cluster.namespace(prefix="rollback") as ns,  # the plane is shared: only this test's objects judged
    ):
        cluster.create(configmap("kept", ns, {"k": "v"}))
        before = snapshot_objects(cluster, CONFIG_MAPS, namespace=ns)
        etcd = cp.processes()["etcd"].pid
        with pytest.raises(ControlPlaneError) as failed:
            cp.upgrade(k8s_assets.version)
        message = str(failed.value)
        assert f"the control plane from {older_assets.version} to {k8s_assets.version} failed" in message
        assert gate in message, message  # the new kube-apiserver's own reason
        assert f"runs {older_assets.version} again, on the same data" in message
        assert cp.version == older_assets.version and served_version(cluster) == older_assets.version
        assert cp.processes()["etcd"].pid == etcd
        assert all(process.running for process in cp.processes().values())
        assert_objects_intact(cluster, before)


@pytest.mark.parametrize(
    ("to", "expected"),
    [
        ("1.0", "that is a downgrade, which Kubernetes does not support"),
        ("same", "the control plane already runs"),
        ("1.99", "ktest does not support that minor (supported: 1.37, 1.36"),
        ("soon", "'soon' is not a Kubernetes version"),
    ],
)
def test_a_refused_upgrade_says_why_and_stops_nothing(plane: ControlPlane, to: str, expected: str) -> None:
    before, version = pids(plane), plane.version
    target = version if to == "same" else previous_minor(version) if to == "1.0" else to
    with pytest.raises(ControlPlaneError) as refused:
        plane.upgrade(target)
    assert expected in str(refused.value)
    assert pids(plane) == before and plane.version == version


def test_a_skip_of_minors_is_refused_naming_the_step_to_take_first() -> None:
    with pytest.raises(ControlPlaneError) as refused:
        plan_upgrade("1.35.4", "1.37")
    assert str(refused.value) == (
        "cannot upgrade from 1.35.4 to 1.37: that skips a minor. Kubernetes' version-skew policy allows "
        "one minor at a time (kube-apiserver and kube-controller-manager must be at most one minor "
        "apart). Upgrade to 1.36 first, then to 1.37; or start the ControlPlane at 1.36 to upgrade to "
        "1.37 in one step."
    )


def test_binaries_of_another_minor_given_as_the_target_are_refused(older_assets: Assets) -> None:
    older = KubeVersion.parse(older_assets.version)
    target = f"{older.major}.{older.minor + 1}"
    with pytest.raises(ControlPlaneError) as refused:
        plan_upgrade(older_assets.version, target, assets=older_assets.directory)
    assert str(refused.value) == (
        f"cannot upgrade to Kubernetes {target}: the binaries in {older_assets.directory} are Kubernetes "
        f"{older_assets.version}. Point assets= at binaries of {target}, or leave it out."
    )


def test_the_newest_minor_has_nothing_to_upgrade_to() -> None:
    with pytest.raises(ControlPlaneError, match=r"1\.37 is the newest minor ktest supports"):
        plan_upgrade("1.37.2", "1.37")


def test_a_plane_others_use_is_not_upgraded(plane: ControlPlane) -> None:
    before = pids(plane)
    plane.shared_by = "the pytest session's cluster"
    try:
        with pytest.raises(ControlPlaneError, match="the pytest session's cluster uses it"):
            plane.upgrade("1.99")
    finally:
        plane.shared_by = None
    assert pids(plane) == before


def test_objects_intact_names_each_object_written_recreated_or_gone(admin: Cluster, ns: str) -> None:
    for name in ("written", "recreated", "gone", "untouched"):
        admin.create(configmap(name, ns, {"k": "v"}))
    before = snapshot_objects(admin, CONFIG_MAPS, namespace=ns)
    assert len(assert_objects_intact(admin, before)) == 4  # nothing changed yet: passes
    admin.patch(configmap_ref("written", ns), {"data": {"k": "changed"}})
    admin.delete(configmap_ref("recreated", ns))
    admin.create(configmap("recreated", ns, {"k": "v"}))
    admin.delete(configmap_ref("gone", ns))
    admin.create(configmap("new", ns))  # created since: not judged
    with pytest.raises(AssertionError) as failed:
        assert_objects_intact(admin, before)
    message = str(failed.value)
    assert message.startswith("3 objects of 4 did not survive the upgrade intact: ")
    assert f"ConfigMap {ns}/gone (v1) is gone" in message
    assert f"ConfigMap {ns}/recreated (v1) was recreated: uid " in message
    assert f"ConfigMap {ns}/written (v1) was written: resourceVersion " in message
    assert "(last written by ktest at " in message
    assert "untouched" not in message and "/new" not in message
