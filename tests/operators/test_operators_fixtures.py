"""namespace_for: a namespace deleted while its operator still runs, or a clear error about fixture
order; operator_for_test: a per-test operator that finalizes the test's objects before it stops."""

from __future__ import annotations

from typing import Any

import pytest
from builders import configmap
from operator_helpers import SAMPLES, wait_for

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import OperatorContext, run_callable, run_kopf
from ktest.operators.pytest_fixtures import namespace_for, operator_for_test


def idle(ctx: OperatorContext) -> None:
    ctx.ready()
    ctx.stop.wait()  # type: ignore[call-arg]


def test_namespace_is_gone_when_the_block_ends(admin: Cluster) -> None:
    with run_callable(idle, admin) as op, namespace_for(op, admin, prefix="fixture") as name:
        assert admin.exists({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    assert admin.get_or_none({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}) is None


def test_operator_stopped_first_is_reported_with_the_fix(admin: Cluster) -> None:
    op = run_callable(idle, admin, name="stopped-too-early")
    with pytest.raises(OperatorError) as raised, namespace_for(op, admin, prefix="fixture"):
        op.stop()
    message = str(raised.value)
    assert "after operator 'stopped-too-early' had stopped (it is stopped)" in message
    assert "Make the namespace fixture request the operator fixture" in message
    op.close()


GUARDED = {"ktest.dev/guarded": "true"}


def guarded(admin: Cluster, ns: str) -> dict[str, Any]:
    created = admin.create(configmap("guarded", ns, labels=GUARDED))
    wait_for(lambda: bool(admin.get(created)["metadata"].get("finalizers")))  # kopf's finalizer is on
    return created


@pytest.mark.parametrize("crash", [False, True])
def test_operator_for_test_finalizes_the_tests_objects_before_it_stops(
    admin: Cluster, ns: str, crash: bool
) -> None:
    recovered: list[bool] = []
    op = run_kopf(SAMPLES / "kopf_finalizer.py", admin, namespaces=[ns], name="per-test")
    with operator_for_test(op, admin, ns, before_cleanup=lambda: recovered.append(True)) as running:
        assert running is op
        created = guarded(admin, ns)
        if crash:
            op.crash()  # a test that crashed its operator: it is restarted to finalize
    assert recovered == [True]
    assert admin.get_or_none(created) is None  # finalized while the operator still ran
    assert op.state == "closed"
    assert "released" in op.logs
    assert ("restart #1" in op.logs) is crash


def test_operator_for_test_leaves_a_stopped_operator_stopped_when_no_finalizer_is_held(
    admin: Cluster, ns: str
) -> None:
    op = run_kopf(SAMPLES / "kopf_finalizer.py", admin, namespaces=[ns], name="stopped-by-test")
    with operator_for_test(op, admin, ns):
        plain = admin.create(configmap("plain", ns))  # the operator puts no finalizer on it
        op.stop()
    assert op.starts == 1  # not restarted: the clean-up needed no operator
    assert "restart #1" not in op.logs
    assert admin.get(plain)["metadata"].get("finalizers") is None


def test_operator_for_test_restarts_a_stopped_operator_for_its_finalizer(admin: Cluster, ns: str) -> None:
    op = run_kopf(SAMPLES / "kopf_finalizer.py", admin, namespaces=[ns], name="stopped-by-test")
    with operator_for_test(op, admin, ns):
        created = guarded(admin, ns)
        op.stop()
    assert op.starts == 2
    finalizer = op.settings.persistence.finalizer
    assert f"restarting stopped-by-test for the clean-up: ConfigMap guarded holds {finalizer}" in op.logs
    assert admin.get_or_none(created) is None  # finalized by the restarted operator
