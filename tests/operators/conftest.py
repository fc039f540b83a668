"""The operator tests use the shared ``plane``, ``admin`` and ``ns`` of tests/conftest.py.

``tests/operators`` is on ``sys.path`` (no ``__init__.py``), so the small operators
written for these tests import as ``sample_operators.<name>``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from operator_helpers import GO_MANAGER


@pytest.fixture(scope="session")
def go_manager() -> Path:
    """The Go controller-runtime manager of fixtures/go-manager, built once (cached across runs)."""
    from ktest.operators import build_go_binary

    return build_go_binary(GO_MANAGER)
