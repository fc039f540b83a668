"""Fixtures for the hardening tests: real control planes, real signals, no fakes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane


@pytest.fixture(scope="session")
def assets(k8s_assets: Assets) -> Assets:
    """The session's binaries (see tests/conftest.py)."""
    return k8s_assets


@pytest.fixture(scope="session")
def plane(assets: Assets) -> Iterator[ControlPlane]:
    """One control plane without controllers for the hardening tests (per worker): they only read
    from it or add objects of their own (its flags, its listeners, users, kubeconfigs)."""
    with ControlPlane(assets=assets, controllers="none") as control_plane:
        yield control_plane
