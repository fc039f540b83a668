"""Operators started by ktest's runners talk through the proxy: kopf, plain client, Go."""

from __future__ import annotations

from pathlib import Path

import pytest
from traffic_helpers import answered

from ktest import faults
from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import OperatorContext, build_go_binary, run_callable, run_kopf, run_subprocess
from ktest.proxy.defaults import use_operator_proxy, use_operator_proxy_http2
from ktest.run_context import RunContext, run_context, use_context
from ktest.wait import eventually

GO_MANAGER = Path(__file__).resolve().parents[2] / "fixtures" / "go-manager"
KOPF_OPERATOR = Path(__file__).resolve().parent / "kopf_labeller.py"


def _idle(ctx: OperatorContext) -> None:
    ctx.ready()
    ctx.stop.wait()  # type: ignore[call-arg]


def test_the_proxy_is_the_default_and_can_be_turned_off(admin: Cluster) -> None:
    with use_operator_proxy(True), run_callable(_idle, admin, name="proxied") as op:
        assert op.proxy is not None and op.api_cluster.server == f"https://127.0.0.1:{op.proxy.port}"
        assert op.api_cluster.server != admin.server
    with use_operator_proxy(False), run_callable(_idle, admin, name="direct") as op:
        assert op.proxy is None and op.api_cluster is admin
        with pytest.raises(OperatorError, match=r"operator 'direct' has no traffic: it does not run behind "
                           r"ktest's API proxy \(it was started with proxy=False or the setting "
                           r"ktest_operator_proxy is off\)"):
            op.traffic  # noqa: B018
    with use_operator_proxy(False), run_callable(_idle, admin, name="asked", proxy=True) as op:
        assert op.proxy is not None


def test_a_failing_test_report_shows_the_operator_s_last_calls(admin: Cluster, ns: str) -> None:
    def lister(ctx: OperatorContext) -> None:
        ctx.cluster.list("v1", "ConfigMap", ns)
        ctx.ready()
        ctx.stop.wait()  # type: ignore[call-arg]

    with use_context(RunContext("session")), run_context("test", test=True) as test:
        with run_callable(lister, admin, name="reporter", namespaces=[ns], proxy=True) as op:
            op.restart()
        sections = dict(test.sections)
    calls = sections["operator reporter API calls"]()
    assert f"list configmaps in {ns} -> 200" in calls
    assert "---- restart #1 ----" in calls
    assert " calls: 0 writes and errors, 0 watches, " in calls.splitlines()[0]
    assert "other calls (2; list configmaps x2):" in calls


@pytest.mark.slow
def test_the_proxy_is_closed_with_the_operator(admin: Cluster) -> None:
    with run_callable(_idle, admin, name="closing", proxy=True) as op:
        proxy = op.proxy
        assert proxy is not None and proxy.kubeconfig is not None and proxy.kubeconfig.exists()
    assert not proxy.kubeconfig.exists()
    import threading

    eventually(lambda: not [t for t in threading.enumerate() if t.name.startswith("ktest-proxy-closing")],
               timeout=5)


def test_a_kopf_operator_goes_through_the_proxy(admin: Cluster, ns: str) -> None:
    pytest.importorskip("kopf")
    with run_kopf(KOPF_OPERATOR, admin, namespaces=[ns], proxy=True) as op:
        admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "k", "namespace": ns}})
        labelled = {"seen": "yes"}
        eventually(lambda: admin.get(("v1", "ConfigMap", "k", ns))["metadata"].get("labels") == labelled)
        assert op.traffic.calls(verb="watch", resource="configmaps", namespace=ns)
        writes = eventually(lambda: answered(op.traffic.writes(kind="ConfigMap", name="k")))
        assert writes[0].status == 200


def test_a_go_manager_goes_through_the_proxy_over_http_1_1(admin: Cluster, ns: str) -> None:
    manager = build_go_binary(GO_MANAGER)
    labels = {"ktest.dev/mirror": "true"}
    with use_operator_proxy_http2(False), run_subprocess(
        [manager], admin, args=["--health-probe-bind-address=127.0.0.1:{port}"],
        ready_http="http://127.0.0.1:{port}/readyz", proxy=True,
    ) as op:
        admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "a", "namespace": ns, "labels": labels}, "data": {"k": "v"}})
        eventually(lambda: admin.get(("v1", "ConfigMap", "a-mirror", ns))["data"] == {"k": "v"})
        watches = op.traffic.calls(verb="watch", resource="configmaps")
        assert watches and watches[0].user_agent.startswith("go-manager/")  # client-go: binary name
        assert {call.protocol for call in op.traffic.calls()} == {"HTTP/1.1"}  # h2 not offered
        # client-go 1.37's reflector lists by a watch that streams the initial state first
        assert watches[0].request.send_initial_events and watches[0].events >= 1
        writes = eventually(lambda: answered(op.traffic.writes(resource="configmaps", namespace=ns)))
        assert {call.status for call in writes} <= {200, 201}, op.traffic.describe(writes)
        # client-go re-opens a watch the proxy closes (its reflector resumes from the last resourceVersion)
        with op.faults.inject(faults.close_watches("configmaps")):
            pass
        eventually(lambda: len(op.traffic.calls(verb="watch", resource="configmaps")) > len(watches),
                   timeout=15)


@pytest.mark.slow
def test_a_go_manager_relists_after_410(admin: Cluster, ns: str) -> None:
    from ktest.assertions import assert_relists_after_410

    manager = build_go_binary(GO_MANAGER)
    with run_subprocess(
        [manager], admin, args=["--health-probe-bind-address=127.0.0.1:{port}"],
        ready_http="http://127.0.0.1:{port}/readyz", proxy=True,
    ) as op:
        relist = assert_relists_after_410(op, "configmaps", timeout=60)  # client-go backs off under load
        assert relist.relist.request.lists
