"""The proxy tests use the shared ``plane``, ``admin`` and ``ns`` of tests/conftest.py.

``tests/proxy`` is on ``sys.path`` (no ``__init__.py``), so the test operator
imports as ``mirror_operator``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktest.cluster import Cluster
from ktest.proxy import OperatorProxy


@pytest.fixture
def proxy(admin: Cluster) -> Iterator[OperatorProxy]:
    """A proxy in front of the admin identity, as an operator named 'test-operator' would get."""
    started = OperatorProxy(admin, "test-operator").start()
    try:
        yield started
    finally:
        started.close()
