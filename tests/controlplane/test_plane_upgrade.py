"""In-place control-plane upgrades (ControlPlane.upgrade): the previous minor to the session's,
on the same etcd, port and certificates, with operators running through it; the refusals that
leave the plane as it was; the assertions of ktest.plane_upgrade.assertions, passing and failing."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from bare_wiring import plane_cluster
from builders import configmap, configmap_ref
from kubernetes.watch.watch import iter_resp_lines

from ktest.assertions import (
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
from ktest.controlplane.upgrade_report import ServedApi
from ktest.errors import ControlPlaneError
from ktest.operators import OperatorContext, run_callable, run_kopf, run_subprocess
from ktest.plane_upgrade.upgrade import plan_upgrade
from ktest.wait import eventually

SAMPLES = Path(__file__).resolve().parent.parent / "operators" / "sample_operators"
MIRROR = {"ktest.dev/kopf-copy": "true"}
CONFIG_MAPS = ("v1", "ConfigMap")
HANDLED = "kopf.zalando.org/last-handled-configuration"  # kopf's last write of an object it handled


@dataclass(frozen=True)
class Removed:
    """An API the target minor no longer serves: the flags that make the minor before serve it,
    the version the target serves the resource as instead, and a body to create one where the
    resource cannot be listed (a review)."""

    api: ServedApi
    flags: tuple[str, ...]
    successor: str
    create: dict[str, str] | None = None


# Per target minor, an API its minor before serves (off unless enabled) and it does not. From the
# OpenAPI documents (api/openapi-spec/v3) and registries of k8s.io/kubernetes v1.32.13 to v1.37.2,
# and the API types' prerelease-lifecycle "removed" releases (k8s.io/api).
REMOVED_IN = {
    "1.33": Removed(
        ServedApi("authentication.k8s.io", "v1beta1", "selfsubjectreviews"),
        ("--runtime-config=authentication.k8s.io/v1beta1=true",),
        "authentication.k8s.io/v1",
        create={"apiVersion": "authentication.k8s.io/v1beta1", "kind": "SelfSubjectReview"},
    ),
    "1.34": Removed(
        ServedApi("admissionregistration.k8s.io", "v1beta1", "validatingadmissionpolicies"),
        ("--runtime-config=admissionregistration.k8s.io/v1beta1=true",),
        "admissionregistration.k8s.io/v1",
    ),
    "1.35": Removed(
        ServedApi("storage.k8s.io", "v1alpha1", "volumeattributesclasses"),
        ("--runtime-config=storage.k8s.io/v1alpha1=true",),
        "storage.k8s.io/v1",
    ),
    # 1.36 no longer knows scheduling.k8s.io/v1alpha1 at all, and refuses to start when asked to
    # serve it by name: every alpha version is asked for instead, which both minors accept.
    "1.36": Removed(
        ServedApi("scheduling.k8s.io", "v1alpha1", "workloads"),
        ("--runtime-config=api/alpha=true", "--feature-gates=GenericWorkload=true"),
        "scheduling.k8s.io/v1alpha2",
    ),
    "1.37": Removed(
        ServedApi("networking.k8s.io", "v1beta1", "servicecidrs"),
        ("--runtime-config=networking.k8s.io/v1beta1=true",),
        "networking.k8s.io/v1",
    ),
}
# Per target minor, a flag its minor before accepts and it refuses: a feature gate on by default
# (beta, or GA not yet locked) before, locked to on (GA) in the target, so turning it off is refused
# ("cannot set feature gate ... locked to true"). 1.37's ClusterTrustBundleProjection (on by
# default) depends on ClusterTrustBundle, which 1.36 lets a cluster switch off.
REFUSED_BY = {
    "1.33": "--feature-gates=ServiceAccountTokenNodeBinding=false",
    "1.34": "--feature-gates=StreamingCollectionEncodingToJSON=false",
    "1.35": "--feature-gates=JobManagedBy=false",
    "1.36": "--feature-gates=VolumeAttributesClass=false",
    "1.37": "--feature-gates=ClusterTrustBundle=false",
}


def previous_minor(version: str) -> str:
    parsed = KubeVersion.parse(version)
    return f"{parsed.major}.{parsed.minor - 1}"


@pytest.fixture(scope="module")
def older_assets(k8s_assets: Assets) -> Assets:
    """The binaries of the minor before the session's (make test installs them)."""
    older = previous_minor(k8s_assets.version)
    if older not in MINORS:
        pytest.skip(f"{k8s_assets.version} is the oldest supported minor: none to upgrade from")
    return resolve_assets(older)


@pytest.fixture
def older_plane(older_assets: Assets) -> Iterator[ControlPlane]:
    """A control plane of this test's own, one minor before the session's."""
    with ControlPlane(assets=older_assets) as cp:
        yield cp


def served_version(cluster: Cluster) -> str:
    """What the API server answers now (``cluster.version`` is read once per Cluster)."""
    return KubeVersion.parse(cluster.rest.request("GET", "/version")["gitVersion"]).text


def pids(cp: ControlPlane) -> dict[str, int | None]:
    return {name: process.pid for name, process in cp.processes().items()}


def test_a_kopf_operator_runs_through_an_upgrade_to_the_next_minor_with_its_objects_intact(
    older_plane: ControlPlane, k8s_assets: Assets, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(SAMPLES.parent))
    etcd_pid, port = older_plane.processes()["etcd"].pid, older_plane.server
    old_version = older_plane.version
    with (
        plane_cluster(older_plane, "upgraded") as cluster,
        cluster.namespace(prefix="upgrade") as ns,
        # kopf's retries of the requests the upgrade cuts pass once they succeed (fail_on_errors on)
        run_kopf(SAMPLES / "kopf_mirror.py", cluster, namespaces=[ns]) as op,
    ):
        cluster.create(configmap("before", ns, {"k": "v"}, labels=MIRROR))
        eventually(lambda: cluster.get(configmap_ref("before-kopf", ns))["data"] == {"k": "v"})
        eventually(lambda: HANDLED in cluster.get(configmap_ref("before", ns))["metadata"]["annotations"])
        before = snapshot_objects(cluster, CONFIG_MAPS, namespace=ns)

        report = older_plane.upgrade(k8s_assets.version)

        assert (report.from_version, report.to_version) == (old_version, k8s_assets.version)
        assert older_plane.version == k8s_assets.version
        assert served_version(cluster) == k8s_assets.version
        # the same etcd process, port and certificates: only the API server and controllers changed
        assert older_plane.processes()["etcd"].pid == etcd_pid and older_plane.server == port
        assert_objects_intact(cluster, before)
        assert_recovered_after_upgrade(op, report, window=1.0)
        assert_no_removed_api_calls(op, report)
        # the operator reconciles what changes after the upgrade
        cluster.create(configmap("after", ns, {"k": "new"}, labels=MIRROR))
        eventually(lambda: cluster.get(configmap_ref("after-kopf", ns))["data"] == {"k": "new"})


def test_a_subprocess_operator_reconnects_to_the_same_address_after_the_upgrade(
    older_plane: ControlPlane, k8s_assets: Assets
) -> None:
    program = [sys.executable, str(Path(__file__).with_name("upgrade_subprocess_operator.py"))]
    with (
        plane_cluster(older_plane, "subprocess") as cluster,
        cluster.namespace(prefix="upgrade") as ns,
        run_subprocess(program, cluster, args=[ns], ready_log="watching configmaps") as op,
    ):
        cluster.create(configmap("before", ns, {"k": "v"}, labels={"ktest.dev/copy": "true"}))
        eventually(lambda: cluster.get(configmap_ref("before-copy", ns))["data"] == {"k": "v"})
        before = snapshot_objects(cluster, CONFIG_MAPS, namespace=ns)
        pid = op.pid

        report = older_plane.upgrade(k8s_assets.version)

        assert op.alive and op.pid == pid  # the same process, never restarted
        assert_objects_intact(cluster, before)
        assert_recovered_after_upgrade(op, report, window=1.0)
        cluster.create(configmap("after", ns, {"k": "new"}, labels={"ktest.dev/copy": "true"}))
        eventually(lambda: cluster.get(configmap_ref("after-copy", ns))["data"] == {"k": "new"})


def no_reconnect_operator(removed: Removed) -> Any:
    """An operator with two bugs: it calls ``removed`` (an API the next minor drops) and gives up
    on its ConfigMap watch at the first connection error instead of reconnecting."""

    def operator(ctx: OperatorContext) -> None:
        assert isinstance(ctx.stop, threading.Event)
        api = kubernetes.config.new_client_from_config(config_file=str(ctx.kubeconfig), persist_config=False)
        custom, core = kubernetes.client.CustomObjectsApi(api), kubernetes.client.CoreV1Api(api)
        group, version, resource = removed.api.group, removed.api.version, removed.api.resource
        if removed.create is None:
            custom.list_cluster_custom_object(group, version, resource)
        else:
            custom.create_cluster_custom_object(group, version, resource, removed.create)
        ready = False
        try:
            while not ctx.stop.is_set():
                response = core.list_namespaced_config_map(
                    "default", watch=True, timeout_seconds=300, _preload_content=False
                )
                if not ready:
                    ctx.ready()
                    ready = True
                for line in iter_resp_lines(response):
                    json.loads(line)
        except Exception as error:  # the bug: one connection error and it is done
            logging.getLogger("no-reconnect").info("giving up: %s", error)
        ctx.stop.wait()
        api.close()

    return operator


def test_the_upgrade_assertions_name_an_operator_that_did_not_reconnect_and_the_removed_api_it_calls(
    older_assets: Assets, k8s_assets: Assets
) -> None:
    target = KubeVersion.parse(k8s_assets.version).minor_text
    removed = REMOVED_IN[target]  # every minor ktest can upgrade to has one (checked below)
    api, group_version = removed.api, removed.api.group_version
    with (
        ControlPlane(assets=older_assets, controllers="none", apiserver_flags=list(removed.flags)) as cp,
        plane_cluster(cp, "removed-api") as cluster,
        run_callable(no_reconnect_operator(removed), cluster, name="no-reconnect") as op,
    ):
        report = cp.upgrade(k8s_assets.version)
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


def test_a_target_that_does_not_start_brings_the_old_minor_back_on_the_same_data(
    older_assets: Assets, k8s_assets: Assets
) -> None:
    target = KubeVersion.parse(k8s_assets.version).minor_text
    flag = REFUSED_BY[target]  # every minor ktest can upgrade to has one (checked above)
    gate = flag.removeprefix("--feature-gates=").split("=")[0]
    with (
        ControlPlane(assets=older_assets, apiserver_flags=[flag]) as cp,
        plane_cluster(cp, "rollback") as cluster,
    ):
        cluster.create(configmap("kept", "default", {"k": "v"}))
        before = snapshot_objects(cluster, CONFIG_MAPS, namespace="default")
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
