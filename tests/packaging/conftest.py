"""The sdist and wheel, built once from a copy of the source tree and checked as the release
workflow checks them (scripts/ci/check-dist): by `make test`'s ``dist`` stage, which names its output
in ``KTEST_DIST_DIR`` (the example project installs the same wheel), or else once per session here."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging_helpers import CHECK_DIST, copy_tree

import ktest
from ktest.wait import eventually


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    built = os.environ.get("KTEST_DIST_DIR")
    if built:
        # make test's dist stage runs beside the suite: its stamp says the files are built and releasable.
        stamp = Path(built) / "RELEASABLE"
        eventually(stamp.exists, timeout=900, description=f"{stamp}, written by make test's dist stage")
        assert f"ktest {ktest.__version__} is releasable" in stamp.read_text()
        yield Path(built)
        return
    tree = copy_tree(tmp_path_factory.mktemp("tree"))
    out = tree / "dist"
    result = subprocess.run([sys.executable, str(CHECK_DIST), "--tag", f"v{ktest.__version__}",
                             "--source", str(tree), "--outdir", str(out)],
                            capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, f"check-dist failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert f"ktest {ktest.__version__} is releasable" in result.stdout
    yield out
