"""A control plane's private directory: where it goes, enough room for etcd, and the janitor
that removes it when the Python process dies without stopping the plane."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ktest.base import janitor
from ktest.base.janitor_client import JanitorHandle
from ktest.base.procfs import private_directory, untrusted
from ktest.errors import ControlPlaneError

_MIN_TMPFS_FREE = 1 << 30
# etcd preallocates its write-ahead log in 64 MiB segments; with less, it fails at some later write.
MIN_RUN_DIR_FREE = 96 << 20
_NO_SPACE = (b"no space left on device", b"disk quota exceeded")


def default_base_directory(shm: Path = Path("/dev/shm")) -> Path:
    """``shm`` when it is a writable tmpfs with 1 GiB free (etcd writes much faster
    there), else the temp directory."""
    try:
        if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
            stats = os.statvfs(shm)
            if stats.f_bavail * stats.f_frsize >= _MIN_TMPFS_FREE:
                return shm
    except OSError:
        pass
    return Path(tempfile.gettempdir())


def disk_hint(base: Path) -> str:
    """How to get out of a full or unwritable directory for control planes."""
    return (
        f"Check the file system holding {base} (`df -h {base}`): free some space there, or "
        "put control planes elsewhere with --ktest-run-dir / ini ktest_run_dir / KTEST_RUN_DIR "
        "(ControlPlane(root_directory=...) in Python)."
    )


def says_disk_full(log: bytes) -> bool:
    """True when a component's log says it could not write for lack of space."""
    return any(marker in log.lower() for marker in _NO_SPACE)


def create_run_directory(base: Path, *, keep_directory: bool) -> tuple[Path, JanitorHandle]:
    """A fresh 0700 directory in ``base`` (with ``logs/``), held by this process and watched by
    a janitor; what killed runs left in ``base`` and in $TMPDIR is swept first.

    ``base`` (symlinks resolved) and every directory above it must be safe from other users
    (:func:`refuse_untrusted_base`); the directory is made and checked through a descriptor of
    ``base``, so the one returned is the one made."""
    try:
        private_directory(base)
        base = base.resolve()
        refuse_untrusted_base(base)
        janitor.sweep_leftovers([base])  # this base's planes, and webhook/operator-log dirs in $TMPDIR
        stats = os.statvfs(base)
        free = stats.f_bavail * stats.f_frsize
        if free < MIN_RUN_DIR_FREE:
            raise ControlPlaneError(
                f"only {free >> 20} MiB free in {base}; a control plane needs at least "
                f"{MIN_RUN_DIR_FREE >> 20} MiB there (etcd preallocates its log in 64 MiB segments).\n"
                f"{disk_hint(base)}"
            )
        directory = base / _make_private_directory(base, f"{janitor.DIRECTORY_PREFIX}{os.getpid()}-")
    except OSError as error:
        raise ControlPlaneError(
            f"cannot create the control plane's directory in {base}: "
            f"{error.strerror or error}.\n{disk_hint(base)}"
        ) from None
    handle = None
    try:
        janitor.write_holder(directory)
        if keep_directory:
            janitor.write_private_text(directory / janitor.KEEP_FILE, "")
        handle = JanitorHandle(directory, keep_directory=keep_directory)
        (directory / "logs").mkdir(mode=0o700)
    except BaseException:
        remove_run_directory(directory, handle, keep=keep_directory)
        raise
    return directory, handle


def refuse_untrusted_base(base: Path) -> None:
    """ControlPlaneError unless ``base`` (resolved) and each directory above it belong to this
    user or root and no one else may write in them without the sticky bit: else another user
    could rename the control plane's directory there and put theirs, receiving its CA and
    admin keys."""
    for directory in (base, *base.parents):
        problem = untrusted(directory, os.stat(directory))
        if problem:
            raise ControlPlaneError(
                f"refusing to put control planes in {base}: {problem}, so another user could take "
                "over the control plane's directory there and receive its CA and admin keys.\n"
                f"Use a directory of your own (--ktest-run-dir / ini ktest_run_dir / KTEST_RUN_DIR, "
                f"ControlPlane(root_directory=...) in Python), or fix {directory}: "
                f"`chown $USER {directory}`, or `chmod go-w {directory}` (`chmod +t` for a shared one)."
            )


def _make_private_directory(base: Path, prefix: str) -> str:
    """Make a new 0700 directory ``<prefix><random>`` in ``base`` through a descriptor of it, and
    check by descriptor that it is this user's and private; its name."""
    base_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        problem = untrusted(base, os.fstat(base_fd))
        if problem:  # swapped since refuse_untrusted_base looked
            raise ControlPlaneError(f"refusing to put control planes in {base}: {problem}")
        for _ in range(100):
            name = f"{prefix}{os.urandom(4).hex()}"
            try:
                os.mkdir(name, 0o700, dir_fd=base_fd)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"no free name {prefix}* in {base}")
        made = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=base_fd)
        try:
            stats = os.fstat(made)
        finally:
            os.close(made)
        if stats.st_uid != os.getuid() or stats.st_mode & 0o077:
            raise ControlPlaneError(
                f"the control plane's new directory {base / name} is not this user's 0700 one "
                f"(owner uid {stats.st_uid}, mode {stats.st_mode & 0o7777:04o}): something else "
                f"changed it at once; check who else writes in {base}"
            )
        return name
    finally:
        os.close(base_fd)


def remove_run_directory(directory: Path | None, handle: JanitorHandle | None, *, keep: bool) -> None:
    """Remove the directory (unless kept) and release its janitor."""
    try:
        if directory is not None and not keep:
            shutil.rmtree(directory, ignore_errors=True)
    finally:
        if handle is not None:
            handle.release()


@contextlib.contextmanager
def writing_in(directory: Path) -> Iterator[None]:
    """Writing certificates, kubeconfigs or etcd data in ``directory``: a full disk or an
    unwritable file becomes a ControlPlaneError saying where and what to do."""
    try:
        yield
    except OSError as error:
        raise ControlPlaneError(
            f"cannot write the control plane's files in {directory}: "
            f"{error.strerror or error} ({error.filename or ''}).\n"
            f"{disk_hint(directory.parent)}"
        ) from None
