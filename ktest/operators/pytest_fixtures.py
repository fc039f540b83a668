"""Fixture building blocks for operators under test (no pytest import needed here).

Session-scoped operator, namespace per test::

    @pytest.fixture(scope="session")
    def operator(cluster):
        with run_kopf("my_operator.handlers", cluster, cluster_wide=True) as op:
            yield op

    @pytest.fixture
    def ns(cluster, operator):          # requesting the operator orders the teardowns
        with namespace_for(operator, cluster) as name:
            yield name

pytest tears fixtures down in the reverse order of their setup, and a fixture
is set up after the fixtures it requests. A namespace fixture that requests
the operator fixture is therefore always deleted *before* the operator stops,
whatever the scopes: the operator is still running while the namespace
controller deletes the objects in it, so its finalizers are processed and the
namespace really goes away. (A namespace fixture that does not request the
operator may be set up before it, and then outlives it: objects with the
operator's finalizers keep the namespace in ``Terminating`` for good.)
:func:`namespace_for` checks exactly this and says how to fix it.

Operator per test: the same ``with run_...(...) as op: yield op`` in a
function-scoped fixture; request it from the namespace fixture as well, or
let the namespace fixture come first in the test's signature.

Failures: a handle registers a health check with the test run, so the
plugin fails the test with the operator's own error at the next
``eventually`` or right after the test body, and attaches the operator's log
(for a session-scoped one: the part written during the failing test).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from ktest.errors import ClusterError, OperatorError

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.operators.handle import OperatorHandle


@contextlib.contextmanager
def namespace_for(
    operator: OperatorHandle,
    cluster: Cluster,
    *,
    prefix: str = "ktest",
    labels: Mapping[str, str] | None = None,
    delete_timeout: float = 60.0,
) -> Iterator[str]:
    """A fresh namespace deleted (and waited for) while ``operator`` still runs.

    ``cluster`` must be allowed to create namespaces (the admin cluster, not
    a least-privilege operator identity). If the operator is no longer running
    when the namespace is to be deleted, the namespace is deleted in the
    background and ``OperatorError`` explains the fixture order to use.
    """
    from ktest.cluster.namespaces import create_namespace, unique_name

    name = unique_name(prefix)
    create_namespace(cluster, name, labels=labels)
    try:
        yield name
    finally:
        if operator.alive:
            _delete_while_running(operator, cluster, name, delete_timeout)
        else:
            cluster.namespace_reaper().submit(name)
            raise OperatorError(
                f"namespace {name} was deleted after operator {operator.name!r} had stopped "
                f"(it is {operator.state}), so the operator could not process the finalizers of the "
                "objects in it. Make the namespace fixture request the operator fixture, so pytest "
                "tears the namespace down first."
            )


def _delete_while_running(operator: OperatorHandle, cluster: Cluster, name: str, timeout: float) -> None:
    from ktest.cluster.namespaces import delete_namespace

    try:
        cleanup = delete_namespace(cluster, name, timeout=timeout)
    except ClusterError as error:
        failure = operator.error
        if failure is not None:
            raise OperatorError(f"namespace {name} could not be deleted: {error}\n{failure}") from error
        raise
    if cleanup.forced and cleanup.held_by:
        held = "; ".join(str(item) for item in cleanup.held_by)
        raise OperatorError(
            f"namespace {name} was deleted only after ktest removed finalizers by force: {held}. "
            f"Operator {operator.name!r} was running but did not finish those objects' deletion; "
            "its log tells why (a failing deletion handler, missing RBAC for update/patch)."
        )
