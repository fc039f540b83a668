"""A user's test module as the quick start writes it (ini + first test + a kopf operator test),
with the annotations ``mypy --strict`` asks for. Type-checked by tests/test_typing.py, never run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ktest
import ktest.assertions
import ktest.operators
from ktest.operators import OperatorHandle, operator_for_test, run_kopf

OPERATOR = Path(__file__).with_name("operator.py")
WIDGET = ("example.com/v1", "Widget", "w")


@pytest.fixture
def operator(cluster: ktest.Cluster, namespace: str) -> Iterator[OperatorHandle]:
    with operator_for_test(run_kopf(OPERATOR, cluster, namespaces=[namespace]), cluster, namespace) as op:
        yield op


@pytest.fixture(scope="session")
def shared_operator(cluster: ktest.Cluster) -> Iterator[ktest.operators.KopfOperator]:
    with ktest.operators.run_kopf("my_op.handlers", cluster, cluster_wide=True) as op:
        yield op


def test_widget_gets_ready(cluster: ktest.Cluster, namespace: str) -> None:
    cluster.apply("tests/widget.yaml", namespace=namespace)
    ktest.eventually(lambda: cluster.get((*WIDGET, namespace))["status"]["ready"])


def reconciled_status(cluster: ktest.Cluster, namespace: str, generation: int) -> dict[str, Any]:
    """The widget's status once the operator has seen ``generation`` (strict mode requires the
    return type here to be what ``eventually`` returns: were it ``Any``, mypy would object)."""

    def reconciled() -> dict[str, Any]:
        status: dict[str, Any] = cluster.get((*WIDGET, namespace))["status"]
        assert status["observedGeneration"] == generation
        return status

    return ktest.eventually(reconciled, timeout=30)


def test_the_operator_owns_and_finalizes(
    cluster: ktest.Cluster, namespace: str, operator: OperatorHandle
) -> None:
    cluster.create({"apiVersion": "example.com/v1", "kind": "Widget",
                    "metadata": {"name": "w", "namespace": namespace}, "spec": {"size": 2}})
    assert reconciled_status(cluster, namespace, generation=1)["replicas"] == 2
    ktest.assert_has_finalizer(cluster, (*WIDGET, namespace), "example.com/cleanup")
    ktest.assertions.assert_observed_generation(cluster, (*WIDGET, namespace))
    ktest.consistently(lambda: operator.alive, duration=1.0)
    with operator.expect_crash(match="boom") as crash:
        cluster.patch((*WIDGET, namespace), {"spec": {"size": -1}})
    assert crash.error is not None
    cluster.delete((*WIDGET, namespace))
    ktest.assert_gone(cluster, (*WIDGET, namespace))
