"""The sdist and wheel, built once per session from a copy of the source tree and checked as the
release workflow checks them (scripts/ci/check-dist)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging_helpers import CHECK_DIST, copy_tree

import ktest


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tree = copy_tree(tmp_path_factory.mktemp("tree"))
    out = tree / "dist"
    result = subprocess.run([sys.executable, str(CHECK_DIST), "--tag", f"v{ktest.__version__}",
                             "--source", str(tree), "--outdir", str(out)],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"check-dist failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert f"ktest {ktest.__version__} is releasable" in result.stdout
    yield out
