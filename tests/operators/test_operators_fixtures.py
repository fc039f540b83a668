"""namespace_for: a namespace deleted while its operator still runs, or a clear error about fixture order."""

from __future__ import annotations

import pytest

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import OperatorContext, run_callable
from ktest.operators.pytest_fixtures import namespace_for


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
