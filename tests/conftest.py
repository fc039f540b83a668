"""Fixtures shared by ktest's own test folders.

Each folder runs its own control plane(s) (some tests restart or break them),
but they all use the same binaries: ``KTEST_ASSETS`` when set (any version,
used as is), else the version given with ``--ktest-k8s-version`` (the plugin's
option, so ``make test K8S_VERSION=1.35`` runs the whole suite on 1.35), else
the default.
"""

from __future__ import annotations

import pytest

from ktest.assets import Assets, resolve_assets


@pytest.fixture(scope="session")
def k8s_assets(pytestconfig: pytest.Config) -> Assets:
    return resolve_assets(pytestconfig.getoption("--ktest-k8s-version", default=None))
