"""The replica tests use the shared ``admin`` and ``ns`` of tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest

GO_MANAGER = Path(__file__).resolve().parents[2] / "fixtures" / "go-manager"


@pytest.fixture(scope="session")
def go_manager() -> Path:
    """The Go controller-runtime manager of fixtures/go-manager (with --leader-elect), built once."""
    from ktest.operators import build_go_binary

    return build_go_binary(GO_MANAGER)
