"""Fixtures of the demo suite: CRDs, the two fixture operators and the fake storage backend.

Copy this file as the starting point of your own suite. The ``cluster`` (one
per session) and ``namespace`` (one per test) fixtures come from ktest's
pytest plugin; the rest is here:

- ``crds``: the project's CRDs, installed once per session and waited for;
- ``storage``: a fresh in-memory storage backend per test (it is outside
  Kubernetes, so it is the only thing faked);
- ``bucket_operator``: the kopf BucketClaim operator, one per test, limited to
  the test's namespace and wired to that test's ``storage``;
- ``webapp_operator``: the WebApp operator (plain ``kubernetes`` client), one
  for the whole session per xdist worker, serving that worker's test namespaces
  (``worker_namespace_selector``; two copies serving every namespace would both
  reconcile each WebApp and fight over its status).

Fixture order matters for operators that own finalizers: an operator must
still run while the objects it finalizes are deleted. The session operator
outlives every test namespace by construction; the per-test one is wrapped in
``operator_for_test``, which deletes what the test left in its namespace (and
waits until it is gone) before the operator stops.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.operators.bucketclaim.storage import FakeStorage
from fixtures.operators.webapp import operator as webapp
from ktest.cluster import Cluster
from ktest.operators import OperatorContext, OperatorHandle, run_callable, run_kopf
from ktest.operators.pytest_fixtures import operator_for_test

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# The operator shares fixtures.operators.bucketclaim.storage with this file: the FakeStorage a
# test controls raises the exception classes the operator catches.
BUCKETCLAIM_OPERATOR = "fixtures.operators.bucketclaim.operator"


# Example projects with their own pyproject.toml run from their own virtual environment, as a
# user's would (scripts/ci/example-project), never inside the demo suite.
collect_ignore = ["memcached-kopf"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "operator_errors_expected: the test makes the operator fail on purpose (e.g. a failing "
        "backend), so errors in its log do not fail the test",
    )


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> list[str]:
    """Install ``fixtures/crds/`` once (waited for until served); returns the CRD names."""
    return cluster.install_crds(FIXTURES / "crds")


@pytest.fixture
def storage() -> Iterator[FakeStorage]:
    """The storage backend the BucketClaim operator provisions into (fresh per test)."""
    backend = FakeStorage()
    yield backend
    backend.recover()


@pytest.fixture
def bucket_operator(
    cluster: Cluster, crds: list[str], namespace: str, storage: FakeStorage, request: pytest.FixtureRequest
) -> Iterator[OperatorHandle]:
    """The BucketClaim operator, watching the test's namespace, provisioning into ``storage``.

    ktest fails the test on an operator's unexpected errors, and on a handler that keeps
    failing (a retry that later succeeds passes), unless the test is marked
    ``operator_errors_expected``.
    """
    errors_expected = request.node.get_closest_marker("operator_errors_expected") is not None
    operator = run_kopf(
        BUCKETCLAIM_OPERATOR,
        cluster,
        namespaces=[namespace],
        memo={"storage": storage, "retry_delay": 0.5},
        name="bucketclaim-operator",
        fail_on_errors=not errors_expected,
    )
    # After the test, while the operator still runs: the backend recovers, the test's claims
    # are deleted and finalized; then the operator stops.
    with operator_for_test(operator, cluster, namespace, before_cleanup=storage.recover):
        yield operator


@pytest.fixture(scope="session")
def webapp_operator(
    cluster: Cluster, crds: list[str], worker_namespace_selector: str
) -> Iterator[OperatorHandle]:
    """The WebApp operator for the whole session (no finalizers, so it may stop last), serving
    this xdist worker's test namespaces only: each worker runs its own copy on the shared cluster."""

    def operator(ctx: OperatorContext) -> None:  # ktest's OperatorContext -> the operator's entry point
        webapp.run(str(ctx.kubeconfig), ctx.stop, ctx.ready, namespace_selector=worker_namespace_selector)

    with run_callable(operator, cluster, name="webapp-operator") as handle:
        yield handle
