"""Fixtures for the plugin tests: the inner runs share the session's control plane
(``plane`` and ``admin`` of tests/conftest.py).

Most tests run a small test file through the plugin with ``pytester`` against
that control plane (backend ``existing``, ``existing_args``); the tests about the
bare backend start their own. ``inner_env``, the environment of an inner run, is in
tests/conftest.py (tests/sessions uses it too).
"""

from __future__ import annotations

import pytest

from ktest.controlplane import ControlPlane

ADMIN_CONTEXT = "ktest-admin@ktest"  # the current context of the embedded control plane's kubeconfig


@pytest.fixture
def existing_args(plane: ControlPlane, inner_env: dict[str, str]) -> list[str]:
    """Options that point an inner run at the shared control plane (backend existing)."""
    return [
        "--ktest-backend=existing",
        f"--ktest-kubeconfig={plane.kubeconfig}",
        f"--ktest-context={ADMIN_CONTEXT}",
    ]
