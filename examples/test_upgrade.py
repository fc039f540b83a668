"""The WebApp operator through an in-place control-plane upgrade (backend bare).

The ``control_plane_upgrade`` fixture gives the test a control plane of its own at the minor
before the session's; the operator runs on it, the test upgrades it under the running operator
and then checks what an upgrade must not break: the objects (uid and resourceVersion), the
operator's watches (re-opened once the new API server answers), and the APIs the operator
calls (none that the new minor removed). The plane is started with networking.k8s.io/v1beta1
enabled, as a cluster that turned that beta on would be: Kubernetes 1.37 no longer serves it.

On backend kind the fixture skips the test, saying why: kind cannot upgrade a cluster in place.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.operators.webapp import operator as webapp
from ktest.assertions import (
    assert_condition,
    assert_no_removed_api_calls,
    assert_objects_intact,
    assert_recovered_after_upgrade,
    snapshot_objects,
)
from ktest.operators import OperatorContext, run_callable
from ktest.plane_upgrade.fixtures import ControlPlaneUpgrade
from ktest.wait import eventually

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
API_VERSION = "platform.example.com/v1alpha1"


def run_webapp(ctx: OperatorContext) -> None:
    webapp.run(str(ctx.kubeconfig), ctx.stop, ctx.ready)


@pytest.mark.ktest_upgrade(apiserver_flags=["--runtime-config=networking.k8s.io/v1beta1=true"])
def test_webapp_survives_a_control_plane_upgrade(control_plane_upgrade: ControlPlaneUpgrade) -> None:
    cluster = control_plane_upgrade.cluster
    cluster.install_crds(FIXTURES / "crds")
    with (
        cluster.namespace(prefix="upgrade") as ns,
        run_callable(run_webapp, cluster, name="webapp-operator") as operator,
    ):
        app = cluster.create(
            {"apiVersion": API_VERSION, "kind": "WebApp", "metadata": {"name": "shop"},
             "spec": {"image": "nginx:1.27", "replicas": 2}},
            namespace=ns,
        )
        assert_condition(cluster, app, "Reconciled", "True", reason="ChildrenUpToDate")
        before = snapshot_objects(
            cluster, (API_VERSION, "WebApp"), ("apps/v1", "Deployment"), ("v1", "Service"), namespace=ns
        )

        report = control_plane_upgrade.upgrade()

        assert_objects_intact(cluster, before)
        assert_recovered_after_upgrade(operator, report)
        assert_no_removed_api_calls(operator, report)
        # still reconciling: a change made after the upgrade reaches the Deployment
        cluster.patch(app, {"spec": {"replicas": 3}})
        eventually(lambda: cluster.get(("apps/v1", "Deployment", "shop", ns))["spec"]["replicas"] == 3)
