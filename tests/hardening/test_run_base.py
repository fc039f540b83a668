"""A run base (``--ktest-run-dir``) another local user could take over is refused, and private
files are only ever new files of this user's (issue 50.2).

Was: any existing base was accepted, and ``write_private_file`` opened its partial file without
``O_EXCL`` under a name known in advance, so another user who owned the base (or could write in
it) swapped the fresh run directory and received the CA and admin keys in a file of theirs.
The tests run as root and play the other user with uid 65534 (``chown``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_directories import directory_in_tmp

from ktest.assets.bundle import Assets
from ktest.base.procfs import write_private_file
from ktest.controlplane import ControlPlane
from ktest.controlplane.run_directory import create_run_directory, remove_run_directory
from ktest.errors import ControlPlaneError

OTHER_UID = 65534  # nobody: the other user

pytestmark = pytest.mark.skipif(os.getuid() != 0, reason="needs root to make another user's directory")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory in /tmp (pytest's tmp_path is root's 0700: fine, but not what a shared path is)."""
    with directory_in_tmp("ktest-base-test-") as path:
        yield path


def _directory(path: Path, *, uid: int, mode: int) -> Path:
    path.mkdir()
    os.chown(path, uid, uid)
    path.chmod(mode)
    return path


def test_a_base_another_user_owns_is_refused_with_the_fix(shared: Path, assets: Assets) -> None:
    base = _directory(shared / "theirs", uid=OTHER_UID, mode=0o755)
    with pytest.raises(ControlPlaneError) as caught, ControlPlane(
        assets=assets, controllers="none", root_directory=base
    ):
        pass
    message = str(caught.value)
    for fragment in (
        f"refusing to put control planes in {base}",
        "owner nobody (uid 65534), mode 0755",
        "belongs to nobody (uid 65534)",
        "receive its CA and admin keys",
        "--ktest-run-dir",
        f"chown $USER {base}",
    ):
        assert fragment in message, message
    assert list(base.iterdir()) == [], "something was made in their directory"


@pytest.mark.parametrize(("mode", "said"), [(0o777, "may be written by others"), (0o775, "by its group")])
def test_a_base_others_may_write_in_without_the_sticky_bit_is_refused(
    shared: Path, mode: int, said: str
) -> None:
    base = _directory(shared / "open", uid=os.getuid(), mode=mode)
    with pytest.raises(ControlPlaneError) as caught:
        create_run_directory(base, keep_directory=False)
    message = str(caught.value)
    assert f"mode {mode:04o}" in message and said in message and "chmod go-w" in message, message
    assert list(base.iterdir()) == []


def test_a_shared_base_with_the_sticky_bit_is_used(shared: Path) -> None:
    """/tmp's and /dev/shm's own case: root's, 1777."""
    base = _directory(shared / "sticky", uid=0, mode=0o1777)
    directory, handle = create_run_directory(base, keep_directory=False)
    try:
        assert directory.parent == base.resolve()
        assert directory.stat().st_uid == os.getuid() and directory.stat().st_mode & 0o777 == 0o700
    finally:
        remove_run_directory(directory, handle, keep=False)


def test_a_base_below_another_users_directory_is_refused(shared: Path) -> None:
    """The base itself is this user's, but the directory above it is not: its owner can rename it."""
    above = _directory(shared / "theirs", uid=OTHER_UID, mode=0o755)
    base = _directory(above / "mine", uid=os.getuid(), mode=0o700)
    with pytest.raises(ControlPlaneError) as caught:
        create_run_directory(base, keep_directory=False)
    message = str(caught.value)
    assert f"{above} (owner nobody (uid 65534), mode 0755)" in message and f"chown $USER {above}" in message
    assert list(base.iterdir()) == []


def test_a_base_reached_through_a_symlink_is_judged_where_it_leads(shared: Path) -> None:
    theirs = _directory(shared / "theirs", uid=OTHER_UID, mode=0o755)
    link = shared / "link"
    link.symlink_to(theirs)
    with pytest.raises(ControlPlaneError) as caught:
        create_run_directory(link, keep_directory=False)
    assert f"refusing to put control planes in {theirs}" in str(caught.value)


def test_a_private_file_is_never_written_in_another_users_directory(shared: Path) -> None:
    theirs = _directory(shared / "theirs", uid=OTHER_UID, mode=0o777)
    with pytest.raises(PermissionError) as caught:
        write_private_file(theirs / "admin.key", b"secret")
    message = str(caught.value)
    assert "refusing to write admin.key there" in message and "belongs to nobody (uid 65534)" in message
    assert list(theirs.iterdir()) == []


def test_a_planted_partial_file_never_receives_a_private_file(tmp_path: Path) -> None:
    """Was: the partial file's name was known in advance (``.<name>.<pid>.partial``) and opened
    without O_EXCL: a file planted there by another user was written and renamed into place,
    so the key ended in a file they own."""
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    planted = directory / f".admin.key.{os.getpid()}.partial"
    planted.write_bytes(b"")
    os.chown(planted, OTHER_UID, OTHER_UID)
    planted.chmod(0o666)
    write_private_file(directory / "admin.key", b"secret")
    written = (directory / "admin.key").stat()
    assert written.st_uid == os.getuid() and written.st_mode & 0o777 == 0o600
    assert planted.read_bytes() == b"" and planted.stat().st_uid == OTHER_UID
