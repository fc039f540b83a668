"""pytest-xdist's ``--dist loadgroup`` with ktest's plugin loaded."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_xdist_groups_keep_to_one_worker(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """`--dist loadgroup` keeps an xdist_group on one worker, also on pytest 9.2, where
    pytest-xdist 3.8's own marking of the group no longer takes (pytest-xdist issue 1386)."""
    pytester.makepyfile(
        f"""
        import os, pytest

        def record(kind, n):
            path = os.path.join({str(tmp_path)!r}, f"{{kind}}-{{n}}")
            with open(path, "w") as out:
                out.write(os.environ["PYTEST_XDIST_WORKER"])

        @pytest.mark.xdist_group("shared-crd")
        @pytest.mark.parametrize("n", range(6))
        def test_grouped(n):
            record("grouped", n)

        @pytest.mark.parametrize("n", range(6))
        def test_free(n):
            record("free", n)
        """
    )
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", timeout=120
    )
    result.assert_outcomes(passed=12)
    workers = {path.name: path.read_text() for path in tmp_path.iterdir()}
    grouped = {worker for name, worker in workers.items() if name.startswith("grouped-")}
    assert len(grouped) == 1, f"the group ran on {sorted(grouped)}"
    assert set(workers.values()) == {"gw0", "gw1"}, "the other tests should still spread"
