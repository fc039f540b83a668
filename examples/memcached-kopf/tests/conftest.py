"""The operator under test, one per test in the test's namespace.

ktest's pytest plugin gives the ``cluster`` (a real API server with the CRDs of
``ktest_crds`` installed) and ``namespace`` (a fresh one per test) fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import ktest
from ktest.operators import OperatorHandle, operator_for_test, run_kopf


@pytest.fixture
def operator(cluster: ktest.Cluster, namespace: str) -> Iterator[OperatorHandle]:
    """The Memcached operator, watching the test's namespace. After the test, while it still
    runs, ``operator_for_test`` deletes the test's Memcacheds and waits until the finalizer let
    them go; then it stops the operator."""
    kopf_operator = run_kopf("memcached_operator.handlers", cluster, namespaces=[namespace])
    with operator_for_test(kopf_operator, cluster, namespace) as op:
        yield op
