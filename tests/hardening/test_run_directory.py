"""The control plane's directory goes to /dev/shm only when that tmpfs has
room (else the temp directory), and honours an explicit run directory."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ktest.assets.bundle import Assets
from ktest.controlplane import ControlPlane
from ktest.controlplane.plane import default_base_directory


def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    yield from _tmpfs(tmp_path / "small", "64m")


@pytest.fixture
def large_tmpfs(tmp_path: Path) -> Iterator[Path]:
    yield from _tmpfs(tmp_path / "large", "2g")  # tmpfs takes memory only when written


def test_a_small_tmpfs_is_passed_over_for_the_temp_directory(small_tmpfs: Path) -> None:
    assert default_base_directory(shm=small_tmpfs) == Path(tempfile.gettempdir())


def test_a_tmpfs_with_room_is_used(large_tmpfs: Path) -> None:
    assert default_base_directory(shm=large_tmpfs) == large_tmpfs


def test_an_explicit_run_directory_is_used(tmp_path: Path, assets: Assets) -> None:
    run_dir = tmp_path / "runs" / "here"
    with ControlPlane(assets=assets, controllers="none", root_directory=run_dir) as plane:
        assert plane.directory.parent == run_dir
        assert (plane.directory / "etcd").is_dir()
        assert plane.directory.stat().st_mode & 0o077 == 0
    assert list(run_dir.iterdir()) == []
