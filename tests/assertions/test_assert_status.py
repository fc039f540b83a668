"""Status-subresource, observedGeneration and condition assertions, against in-test
controllers that write status correctly or make the classic mistakes."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from assertion_controllers import GADGET, Controller, now, widget, write

from ktest.assertions import (
    assert_condition,
    assert_observed_generation,
    assert_status_subresource,
    assert_transition_time_stable,
    condition_shape_problems,
)
from ktest.cluster import Cluster

Reconcile = Callable[[dict[str, Any]], None]


def status_writer(
    cluster: Cluster,
    *,
    through_main: bool = False,
    ready: str = "True",
    reason: str = "Reconciled",
    tick_transition_time: bool = False,
) -> Reconcile:
    """Writes status (observedGeneration, phase, a Ready condition) when it differs from
    what is there. The switches are the bugs: status written through the main resource,
    a lastTransitionTime rewritten on every reconcile of a new generation."""

    def reconcile(obj: dict[str, Any]) -> None:
        generation = obj["metadata"]["generation"]
        status = obj.get("status") or {}
        old = {c["type"]: c for c in status.get("conditions") or []}.get("Ready")
        if tick_transition_time:
            if status.get("observedGeneration") == generation:
                return  # a generation predicate: no self-triggered loop, only the timestamp bug
            transition = now()
        else:
            transition = old["lastTransitionTime"] if old and old["status"] == ready else now()
        condition = {
            "type": "Ready", "status": ready, "reason": reason,
            "message": f"size {obj['spec'].get('size')}", "observedGeneration": generation,
            "lastTransitionTime": transition,
        }
        desired = {"observedGeneration": generation, "phase": "Ready" if ready == "True" else "Failed",
                   "conditions": [condition]}
        if {k: status.get(k) for k in desired} == desired:
            return
        write(cluster, obj, {"status": desired}, manager="widget-op",
              subresource=None if through_main else "status")

    return reconcile


def poke(cluster: Cluster, obj: dict[str, Any], text: str = "poke") -> Callable[[], object]:
    """A spec change: a new generation the controller must reconcile."""
    return lambda: cluster.patch(obj, {"spec": {"message": text}})


# ----------------------------------------------------------------- status subresource


def test_status_subresource_passes_and_restores_the_object(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns, size=3))
    cluster.patch(created, {"status": {"phase": "Ready"}}, subresource="status")
    before = cluster.get(created)
    report = assert_status_subresource(cluster, created)
    after = cluster.get(created)
    assert report.served
    assert report.checked == [
        "status written through the main resource is ignored",
        "a status write through /status leaves metadata.generation unchanged",
        "spec written through /status is ignored",
    ]
    # probes derived from the CRD schema: one writable scalar field of each section
    assert len(report.status_probe) == 1 and set(report.status_probe) <= {"phase", "lastUpdated",
                                                                          "observedGeneration"}
    assert len(report.spec_probe or {}) == 1 and set(report.spec_probe or {}) <= {"size", "message"}
    assert after["status"] == before["status"]
    assert after["spec"] == before["spec"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]


def test_status_subresource_fails_on_a_crd_without_it(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("g1", ns, kind=GADGET))
    with pytest.raises(AssertionError) as failure:
        assert_status_subresource(cluster, created)
    message = str(failure.value)
    assert message.startswith("Gadget g1 has no working status subresource\n")
    assert f"Object: Gadget {ns}/g1 (assertions.ktest.test/v1, uid {created['metadata']['uid']})" in message
    assert "Rule: a kind with a status subresource serves /status" in message
    assert "the API server does not serve gadgets/status (discovery lists subresources: none)" in message
    assert re.search(r"a merge patch of status \{'\w+': [^}]+\} to the main resource was stored", message)
    assert "that status write changed metadata.generation from 1 to 2" in message
    assert "declares no subresources.status for assertions.ktest.test/v1" in message
    assert "phase" not in (cluster.get(created).get("status") or {})  # the probe value was put back


SHAPES = "shapes.ktest.test/v1"
CONDITION = {"type": "Ready", "status": "True", "reason": "Done", "message": "ok",
             "lastTransitionTime": "2020-01-01T00:00:00Z"}


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        ("OnlyConditions", None),
        ("OnlyConditions", {"conditions": [CONDITION]}),
        ("MapStatus", {"zone": "a"}),
        ("ListStatus", {"hosts": ["a", "b", "c"]}),
        ("EnumStatus", {"phase": "Pending"}),
        ("PatternStatus", None),
        ("RequiredStatus", None),
        ("RequiredStatus", {"summary": {"state": "Up"}}),
        ("EmptyStatus", None),
    ],
)
def test_status_subresource_handles_every_status_shape(
    cluster: Cluster, ns: str, kind: str, status: dict[str, Any] | None
) -> None:
    created = cluster.create({"apiVersion": SHAPES, "kind": kind, "metadata": {"name": "s", "namespace": ns},
                              "spec": {"size": 1}})
    if status is not None:
        cluster.patch(created, {"status": status}, subresource="status")
    before = cluster.get(created)
    report = assert_status_subresource(cluster, created)
    after = cluster.get(created)
    assert report.served
    assert after.get("status") == before.get("status")  # every probe value was put back
    assert after["spec"] == before["spec"]
    if kind == "EmptyStatus":  # nothing of status can be stored: said, not silently passed
        assert report.checked == ["spec written through /status is ignored"]
        assert len(report.skipped) == 2 and "keeps no field of status" in report.skipped[0]
    else:
        assert "status written through the main resource is ignored" in report.checked


def test_status_subresource_fails_on_conditions_only_status_without_it(cluster: Cluster, ns: str) -> None:
    created = cluster.create({"apiVersion": SHAPES, "kind": "BareConditions",
                              "metadata": {"name": "b", "namespace": ns}, "spec": {"size": 1}})
    with pytest.raises(AssertionError) as failure:
        assert_status_subresource(cluster, created)
    message = str(failure.value)
    assert "has no working status subresource" in message
    assert "the API server does not serve bareconditions/status" in message
    assert re.search(r"a merge patch of status \{'conditions': \[\{.*'type': 'ktest-probe-\w+'", message)
    assert "status" not in cluster.get(created)  # the probe condition was removed again


# ----------------------------------------------------------------- observedGeneration


def test_observed_generation_passes_through_generations(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, status_writer(cluster)):
        created = cluster.create(widget("w1", ns))
        assert assert_observed_generation(cluster, created)["status"]["observedGeneration"] == 1
        poke(cluster, created)()
        assert assert_observed_generation(cluster, created)["status"]["observedGeneration"] == 2


def test_observed_generation_fails_when_status_goes_through_the_main_resource(
    cluster: Cluster, ns: str
) -> None:
    with Controller(cluster, ns, status_writer(cluster, through_main=True)) as controller:
        created = cluster.create(widget("w1", ns))
        with pytest.raises(AssertionError) as failure:
            assert_observed_generation(cluster, created, timeout=1)
    assert controller.passes >= 1  # it did reconcile, and its writes were dropped
    message = str(failure.value)
    assert message.startswith(
        "Widget w1: status.observedGeneration never caught up with metadata.generation within 1s\n")
    assert f"Object: Widget {ns}/w1 (assertions.ktest.test/v1, uid {created['metadata']['uid']})" in message
    assert "Rule: a controller reports the generation it acted on in status.observedGeneration" in message
    assert "status.observedGeneration is None but metadata.generation is 1" in message
    assert "managedFields show no write of status by anyone" in message
    assert "the API server drops it silently when the kind has a status subresource" in message


# ----------------------------------------------------------------- conditions


def test_condition_passes_with_every_field_checked(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, status_writer(cluster)):
        created = cluster.create(widget("w1", ns, size=4))
        condition = assert_condition(cluster, created, "Ready", "True", reason="Reconciled",
                                     message=re.compile(r"size \d"), observed_generation=True)
        poke(cluster, created)()
        assert_condition(cluster, created, "Ready", observed_generation=2, message="size 4")
    assert condition["observedGeneration"] == 1
    assert condition_shape_problems(condition) == []


def test_condition_fails_with_the_fields_that_differ(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, status_writer(cluster, ready="False", reason="BackendDown")):
        created = cluster.create(widget("w1", ns))
        with pytest.raises(AssertionError) as failure:
            assert_condition(cluster, created, "Ready", "True", reason="Reconciled", timeout=1)
    message = str(failure.value)
    assert message.startswith("Widget w1: condition 'Ready' is not as expected within 1s\n")
    assert "Rule: conditions follow metav1.Condition" in message
    assert "condition 'Ready': status expected 'True', got 'False'; reason expected 'Reconciled', got " \
           "'BackendDown'" in message
    assert re.search(r"condition last seen: \{.*'reason': 'BackendDown'.*'status': 'False'", message)


def test_condition_fails_when_never_set(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    cluster.patch(created, {"status": {"phase": "Pending"}}, subresource="status")
    with pytest.raises(AssertionError) as failure:
        assert_condition(cluster, created, "Ready", timeout=0.5)
    message = str(failure.value)
    assert "condition 'Ready' never appeared within 0.5s" in message
    assert "no condition of type 'Ready' in status.conditions (present: none)" in message
    assert "status written by 'ktest' (Update, /status, the test)" in message


def test_condition_shape_problems_name_each_departure() -> None:
    problems = condition_shape_problems({"type": "Ready", "status": "yes", "reason": "not camel"})
    assert problems == [
        "status 'yes' is not one of True, False, Unknown",
        "reason 'not camel' is not CamelCase",
        "lastTransitionTime is missing",
    ]


# ----------------------------------------------------------------- lastTransitionTime


def test_transition_time_stable_passes_when_only_the_generation_moves(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, status_writer(cluster)):
        created = cluster.create(widget("w1", ns))
        assert_condition(cluster, created, "Ready")
        history = assert_transition_time_stable(cluster, created, "Ready", duration=1,
                                                trigger=poke(cluster, created))
    assert len(history.versions) >= 3  # start, the spec change, the status write for generation 2
    assert len({time for _, _, time in history.versions}) == 1


def test_transition_time_stable_fails_when_rewritten_on_every_reconcile(cluster: Cluster, ns: str) -> None:
    with Controller(cluster, ns, status_writer(cluster, tick_transition_time=True)):
        created = cluster.create(widget("w1", ns))
        assert_condition(cluster, created, "Ready", observed_generation=1)
        with pytest.raises(AssertionError) as failure:
            assert_transition_time_stable(cluster, created, "Ready", duration=1,
                                          trigger=poke(cluster, created))
    message = str(failure.value)
    assert message.startswith(
        "Widget w1: condition 'Ready' lastTransitionTime is not stable (1 of 2 writes in 1s)\n"
    )
    assert "Rule: a condition's lastTransitionTime changes when, and only when, its status changes" in message
    assert re.search(r"\+\d\.\d\ds rv \d+: status stayed 'True' but lastTransitionTime moved \S+ -> \S+ "
                     r"\(written by 'widget-op' \(Update, /status\)\)", message)


def test_transition_time_stable_needs_the_condition(cluster: Cluster, ns: str) -> None:
    created = cluster.create(widget("w1", ns))
    with pytest.raises(AssertionError, match="has no condition 'Ready' to watch"):
        assert_transition_time_stable(cluster, created, "Ready", duration=0.1)
