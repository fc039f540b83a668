"""An inner suite of small operator tests that fail for real, run by the browser tests' fixture
``failing_timelines`` (a copy of this folder, in its own pytest session with
``--ktest-timeline on-failure``): each test starts the demo's operators with one of the seeded
bugs (fixtures/operators/seeded_bugs.py) and fails the way the demo suite catches that bug."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from fixtures.operators.bucketclaim.storage import FakeStorage
from fixtures.operators.webapp import operator as webapp
from ktest.cluster import Cluster
from ktest.operators import OperatorContext, OperatorHandle, run_callable, run_kopf
from ktest.operators.pytest_fixtures import operator_for_test

FIXTURES = Path(webapp.__file__).resolve().parents[2]  # fixtures/operators/webapp/operator.py


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> list[str]:
    return cluster.install_crds(FIXTURES / "crds")


@pytest.fixture
def start_webapp(
    cluster: Cluster, crds: list[str], worker_namespace_selector: str
) -> Iterator[Callable[[str | None], OperatorHandle]]:
    """Start the WebApp operator (plain kubernetes client) with a seeded bug, or None for none."""
    with ExitStack() as running:

        def start(bug: str | None) -> OperatorHandle:
            def operator(ctx: OperatorContext) -> None:
                webapp.run(
                    str(ctx.kubeconfig),
                    ctx.stop,
                    ctx.ready,
                    namespace_selector=worker_namespace_selector,
                    seeded_bug_name=bug or "",
                )

            return running.enter_context(run_callable(operator, cluster, name="webapp"))

        yield start


@pytest.fixture
def storage() -> Iterator[FakeStorage]:
    backend = FakeStorage()
    yield backend
    backend.recover()


@pytest.fixture
def start_bucketclaim(
    cluster: Cluster, crds: list[str], namespace: str, storage: FakeStorage
) -> Iterator[Callable[[str | None], OperatorHandle]]:
    """Start the BucketClaim operator (kopf) in the test's namespace with a seeded bug."""
    with ExitStack() as running:

        def start(bug: str | None) -> OperatorHandle:
            operator = run_kopf(
                "fixtures.operators.bucketclaim.operator",
                cluster,
                namespaces=[namespace],
                memo={"storage": storage, "retry_delay": 0.5, "seeded_bug": bug or ""},
                name="bucketclaim",
                fail_on_errors=False,
            )
            running.enter_context(
                operator_for_test(operator, cluster, namespace, before_cleanup=storage.recover)
            )
            return operator

        yield start
