"""The watch wake-up tests use the shared ``plane`` and ``admin`` of tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bare_wiring import plane_cluster

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane


@pytest.fixture
def cluster(plane: ControlPlane) -> Iterator[Cluster]:
    """A Cluster of its own, so a test sees exactly the watches it caused."""
    with plane_cluster(plane, "own") as own:
        yield own


@pytest.fixture(scope="module")
def ns(admin: Cluster) -> Iterator[str]:
    """Overrides the shared ``ns``: one namespace per module (deleting one takes seconds),
    tests use their own object names."""
    with admin.namespace(prefix="wait") as name:
        yield name
