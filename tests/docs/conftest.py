"""The docs session's warm control planes, each started once per session (per xdist worker) on the
first page that can share it, and stopped at the session's end (see warm_plane)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from warm_plane import DocsWarmPlane, DocsWarmPlanes


@pytest.fixture(scope="session")
def docs_warm_planes(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[DocsWarmPlanes]:
    version = pytestconfig.getoption("--ktest-k8s-version", default=None)
    planes = DocsWarmPlanes(lambda: tmp_path_factory.mktemp("warm-state"), str(version) if version else None)
    try:
        yield planes
    finally:
        planes.close()


@pytest.fixture(scope="session")
def docs_warm_plane(docs_warm_planes: DocsWarmPlanes) -> DocsWarmPlane:
    """The plane of pages that ask nothing of it: no simulated nodes, the default controllers."""
    return docs_warm_planes.get()
