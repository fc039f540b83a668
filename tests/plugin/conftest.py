"""Fixtures for the plugin tests: the inner runs share the session's control plane
(``plane`` and ``admin`` of tests/conftest.py).

Most tests run a small test file through the plugin with ``pytester`` against
that control plane (backend ``existing``); the tests about the bare backend,
xdist and reuse start their own. ``pytester`` points HOME at a temporary
directory, so the binary cache location is pinned here to the real one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ktest.assets.store import Locations
from ktest.controlplane import ControlPlane

ADMIN_CONTEXT = "ktest-admin@ktest"  # the current context of the embedded control plane's kubeconfig


@pytest.fixture(scope="session")
def binary_cache() -> Path:
    """The binary cache as seen from the real HOME (before pytester replaces it)."""
    return Locations.from_env().cache_root


@pytest.fixture
def inner_env(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, binary_cache: Path, tmp_path: Path
) -> dict[str, str]:
    """Environment of an inner run: the real binary cache, a private state directory, no KTEST_*."""
    pytester.syspathinsert()
    for name in list(os.environ):
        if name.startswith("KTEST_") and name not in ("KTEST_CACHE_DIR", "KTEST_ASSETS"):
            monkeypatch.delenv(name)  # the outer run's settings must not leak in
    values = {
        "KTEST_CACHE_DIR": os.environ.get("KTEST_CACHE_DIR") or str(binary_cache),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PYTEST_ADDOPTS": "-p no:cacheprovider -W ignore::DeprecationWarning",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


@pytest.fixture
def existing_args(plane: ControlPlane, inner_env: dict[str, str]) -> list[str]:
    """Options that point an inner run at the shared control plane (backend existing)."""
    return [
        "--ktest-backend=existing",
        f"--ktest-kubeconfig={plane.kubeconfig}",
        f"--ktest-context={ADMIN_CONTEXT}",
    ]
