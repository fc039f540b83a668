"""Quiescence (hot-loop detection) against in-test controllers that converge, loop on
their own status writes, or keep rewriting their children."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import pytest
from assertion_controllers import Controller, now, widget, write
from test_assert_ownership import child_maker, child_of
from test_assert_status import status_writer

from ktest.assertions import assert_observed_generation, assert_quiescent
from ktest.assertions.changes import changed_fields
from ktest.cluster import Cluster

Reconcile = Callable[[dict[str, Any]], None]


def both(*steps: Reconcile) -> Reconcile:
    def reconcile(obj: dict[str, Any]) -> None:
        for step in steps:
            step(obj)

    return reconcile


def status_loop(cluster: Cluster) -> Reconcile:
    """The classic bug: a fresh timestamp in status on every reconcile, and every status
    write is an event that triggers the next reconcile."""

    def reconcile(obj: dict[str, Any]) -> None:
        write(cluster, obj, {"status": {"observedGeneration": obj["metadata"]["generation"],
                                        "lastUpdated": now()}},
              manager="hotloop-op", subresource="status")

    return reconcile


def child_refresher(cluster: Cluster) -> Reconcile:
    """Owns() the ConfigMaps and 'refreshes' each on every event about it: a loop through a child."""

    def reconcile(config: dict[str, Any]) -> None:
        if config["metadata"].get("ownerReferences"):
            write(cluster, config, {"data": {"refreshed": now()}}, manager="child-op")

    return reconcile


def test_quiescent_passes_once_a_correct_controller_converged(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, both(status_writer(cluster), child_maker(cluster))):
        created = cluster.create(widget("w1", ns))
        assert_observed_generation(cluster, created)
        from ktest.wait import eventually

        eventually(lambda: cluster.get(child_of(created)))
        result = assert_quiescent(cluster, created, children=[child_of(created)], window=1)
    assert result.window >= 1
    assert result.targets[0].startswith(f"Widget {ns}/w1 (assertions.ktest.test/v1, uid ")
    assert result.targets[1].startswith(f"ConfigMap {ns}/w1-config (v1, uid ")


def test_quiescent_fails_on_a_status_update_loop(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, status_loop(cluster)):
        created = cluster.create(widget("w1", ns))
        assert_observed_generation(cluster, created)
        with pytest.raises(AssertionError) as failure:
            assert_quiescent(cluster, created, window=1)
    message = str(failure.value)
    headline = re.search(
        rf"^Widget w1 is not quiescent: (\d+) writes in a 1s window\n"
        rf"Object: Widget {ns}/w1 \(assertions\.ktest\.test/v1, uid [-0-9a-f]+\)", message)
    assert headline and int(headline.group(1)) >= 3, message
    assert "Rule: a controller that has converged writes nothing until something changes" in message
    assert re.search(r"writes, resourceVersion \d+ -> \d+", message)
    assert re.search(r"\+\d\.\d\ds MODIFIED rv \d+ by 'hotloop-op' \(Update, /status\): status\.lastUpdated: "
                     r"'[^']+' -> '[^']+'", message)
    assert re.search(r"fields changed most often: status\.lastUpdated x\d+", message)


def test_quiescent_fails_on_a_loop_through_a_child(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, child_maker(cluster)), \
            Controller(cluster, ns, child_refresher(cluster), kind="ConfigMap", api_version="v1"):
        created = cluster.create(widget("w1", ns))
        from ktest.wait import eventually

        eventually(lambda: cluster.get(child_of(created))["data"].get("refreshed"))
        with pytest.raises(AssertionError) as failure:
            assert_quiescent(cluster, created, children=[("v1", "ConfigMap")], window=1)
    message = str(failure.value)
    assert re.search(r"^Widget w1 is not quiescent: \d+ writes in a 1s window \(to 1 of the 2 "
                     r"watched targets\)", message)
    uid = created["metadata"]["uid"]
    assert f"Widget {ns}/w1 (assertions.ktest.test/v1, uid {uid}): no writes" in message
    assert re.search(rf"every ConfigMap \(v1\) in namespace {ns}: \d+ writes", message)
    assert re.search(r"\+\d\.\d\ds w1-config MODIFIED rv \d+ by 'child-op' \(Update\): data\.refreshed:",
                     message)


class SystemWriter:
    """Kubernetes' own controller at work: writes ``obj`` under the field manager
    ``kube-controller-manager`` every 0.2 s until stopped (as the deployment controller
    updates a Deployment's status while its Pods start on a cluster with nodes)."""

    def __init__(self, cluster: Cluster, obj: dict[str, Any],
                 manager: str = "kube-controller-manager") -> None:
        self.cluster, self.obj, self.manager = cluster, obj, manager
        self.writes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            write(self.cluster, self.obj, {"data": {self.manager: str(self.writes)}}, manager=self.manager)
            self.writes += 1

    def __enter__(self) -> SystemWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def converged_with_child(cluster: Cluster, ns: str) -> tuple[dict[str, Any], dict[str, Any]]:
    created = cluster.create(widget("w1", ns))
    assert_observed_generation(cluster, created)
    from ktest.wait import eventually

    return created, eventually(lambda: cluster.get(child_of(created)))


def test_quiescent_ignores_kubernetes_own_controllers_by_default(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, both(status_writer(cluster), child_maker(cluster))):
        created, child = converged_with_child(cluster, ns)
        with SystemWriter(cluster, child) as system:
            before = system.writes
            assert_quiescent(cluster, created, children=[child], window=1)
            during = system.writes - before
    assert during >= 2, "the system writer did not write during the window: the test proves nothing"


def test_quiescent_counts_kubernetes_own_controllers_when_told(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, both(status_writer(cluster), child_maker(cluster))):
        created, child = converged_with_child(cluster, ns)
        with SystemWriter(cluster, child), pytest.raises(AssertionError) as failure:
            assert_quiescent(cluster, created, children=[child], window=1, ignore_writers=())
    message = str(failure.value)
    assert re.search(r"^Widget w1 is not quiescent: \d+ writes in a 1s window \(to 1 of the 2", message)
    system = r"by 'kube-controller-manager' \(Update\): data\.kube-controller-manager"
    assert re.search(system, message), message
    assert "[ignored]" not in message


def test_quiescent_reports_ignored_writes_beside_the_operators(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, both(status_writer(cluster), child_maker(cluster))):
        created, child = converged_with_child(cluster, ns)
        with SystemWriter(cluster, child), SystemWriter(cluster, child, manager="child-op"), \
                pytest.raises(AssertionError) as failure:
            assert_quiescent(cluster, created, children=[child], window=1)
    message = str(failure.value)
    counted = re.search(r"ConfigMap \S+ \(v1, uid [-0-9a-f]+\): (\d+) writes? \(and (\d+) ignored "
                        r"writes? by kube-controller-manager\)", message)
    assert counted and int(counted.group(1)) >= 1 and int(counted.group(2)) >= 1, message
    headline = re.search(r"^Widget w1 is not quiescent: (\d+) writes?", message)
    assert headline and headline.group(1) == counted.group(1), message
    system = r"by 'kube-controller-manager' \(Update\): data\.kube-controller-manager: "
    assert re.search(system + r".* \[ignored\]", message), message
    assert re.search(r"by 'child-op' \(Update\): data\.child-op: [^\n]*$", message, re.M)


def test_quiescent_needs_the_object(cluster: Cluster, ns: str) -> None:
    with pytest.raises(AssertionError, match=r"Widget \S+/nope .* does not exist"):
        assert_quiescent(cluster, widget("nope", ns), window=0.1)


def test_changed_fields_lists_each_change_by_path() -> None:
    old = {"metadata": {"resourceVersion": "1", "labels": {"a": "1"}},
           "status": {"conditions": [{"type": "Ready", "status": "False"}], "phase": "x"}}
    new = {"metadata": {"resourceVersion": "2", "labels": {"b": "2"}},
           "status": {"conditions": [{"type": "Ready", "status": "True"}], "count": 3}}
    assert changed_fields(old, new) == [
        "metadata.labels.a: removed (was '1')",
        "metadata.labels.b: added '2'",
        "status.conditions[type=Ready].status: 'False' -> 'True'",
        "status.phase: removed (was 'x')",
        "status.count: added 3",
    ]
