"""The docs session's warm control plane, started once per session (per xdist worker) on the
first page that can share it, and stopped at the session's end (see warm_plane)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from warm_plane import DocsWarmPlane
from warm_plane import docs_warm_plane as start_docs_warm_plane


@pytest.fixture(scope="session")
def docs_warm_plane(
    tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[DocsWarmPlane]:
    version = pytestconfig.getoption("--ktest-k8s-version", default=None)
    yield from start_docs_warm_plane(tmp_path_factory.mktemp("warm-state"), str(version) if version else None)
