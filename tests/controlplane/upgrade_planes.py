"""What test_plane_upgrade.py and test_versions.py share: per target minor, an API its minor before
serves and it does not (``REMOVED_IN``) and a flag it refuses (``REFUSED_BY``); the operator that
calls the removed API and never reconnects; and the session's one plane per older minor that an
upgrade never leaves (:func:`never_upgraded_plane`), so that test_versions' garbage collection and
test_plane_upgrade's rolled-back upgrade need one plane, not two."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import kubernetes
import pytest
from kubernetes.watch.watch import iter_resp_lines

from ktest.assets import Assets
from ktest.assets.selectors import KubeVersion
from ktest.controlplane import ControlPlane
from ktest.controlplane.upgrade_report import ServedApi
from ktest.operators import OperatorContext


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


def next_minor(version: str) -> str:
    parsed = KubeVersion.parse(version)
    return f"{parsed.major}.{parsed.minor + 1}"


_NEVER_UPGRADED = pytest.StashKey[dict[str, ControlPlane]]()


def never_upgraded_plane(request: pytest.FixtureRequest, assets: Assets) -> ControlPlane:
    """The session's plane of ``assets`` with the default controllers, started on first use, stopped
    when the session-scoped fixture that started it ends. It runs with the flag the next minor
    refuses (``REFUSED_BY``), so an upgrade of it fails and brings ``assets``' minor back on the same
    data: every test using it sees that minor serving, whichever runs first."""
    planes = request.config.stash.setdefault(_NEVER_UPGRADED, {})
    if assets.version in planes:
        return planes[assets.version]
    refused = REFUSED_BY.get(next_minor(assets.version))
    plane = ControlPlane(assets=assets, apiserver_flags=[refused] if refused else [])
    plane.start()

    def stop() -> None:
        planes.pop(assets.version, None)
        plane.stop()

    request.addfinalizer(stop)
    planes[assets.version] = plane
    return plane


def no_reconnect_operator(removed: Removed) -> Callable[[OperatorContext], None]:
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
