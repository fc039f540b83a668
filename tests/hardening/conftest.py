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


@pytest.fixture(scope="module")
def plane(assets: Assets) -> Iterator[ControlPlane]:
    """One control plane without controllers for the tests of a module."""
    with ControlPlane(assets=assets, controllers="none") as control_plane:
        yield control_plane
