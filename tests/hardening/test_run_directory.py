"""The control plane's directory goes to /dev/shm only when that tmpfs has
room (else the temp directory), and honours an explicit run directory: that start is
test_shared_machine.py's (a run directory with another user's runs in it), and test_file_modes.py's
module plane (a run directory that does not exist yet)."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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
