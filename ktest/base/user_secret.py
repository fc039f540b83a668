"""A secret of this user's, kept in their cache (``${XDG_CACHE_HOME:-~/.cache}/ktest/holder-key``,
0600): what ktest signs the records it leaves where others may write with, so that it acts only on
records it made itself (a namespace's holder annotation in a shared cluster: anyone allowed to
patch namespaces can copy ktest's label and annotation, nobody without this file can sign one).

Made once, as a new file (``O_EXCL``) linked into place, so concurrent first runs (xdist
workers) agree on one key; read back only if it is a regular file of this user's that no one
else may read.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import stat
import threading
from pathlib import Path

from ktest.base.procfs import private_directory, untrusted

KEY_FILE = "holder-key"
_KEY_BYTES = 32
_lock = threading.Lock()
_keys: dict[Path, bytes] = {}


class SecretUnusable(PermissionError):
    """The key file exists but cannot be trusted (or read); the message says how to fix it."""


def secret_path() -> Path:
    """Where this user's key is kept."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ktest" / KEY_FILE


def user_secret(path: Path | None = None) -> bytes:
    """This user's key (made on first use); :class:`SecretUnusable` when the file is not one."""
    path = path or secret_path()
    with _lock:
        if path not in _keys:
            if not os.path.lexists(path):
                _create(path)
            _keys[path] = _read(path)
        return _keys[path]


def sign(text: str, path: Path | None = None) -> str:
    """An HMAC-SHA256 of ``text`` with this user's key (hex)."""
    return hmac.new(user_secret(path), text.encode(), hashlib.sha256).hexdigest()


def signed(text: str, mac: str, path: Path | None = None) -> bool:
    """True when ``mac`` is :func:`sign` of ``text`` with this user's key."""
    return bool(mac) and hmac.compare_digest(sign(text, path), mac)


def _create(path: Path) -> None:
    private_directory(path.parent)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        problem = untrusted(path.parent, os.fstat(directory))
        if problem:
            raise SecretUnusable(f"cannot keep ktest's key in {path.parent}: {problem}. {_FIX}")
        partial = f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.partial"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(partial, flags, 0o600, dir_fd=directory)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(os.urandom(_KEY_BYTES))
            with contextlib.suppress(FileExistsError):  # another process made it first: theirs holds
                os.link(partial, path.name, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
        finally:
            os.unlink(partial, dir_fd=directory)
    finally:
        os.close(directory)


_FIX = "Remove it (ktest makes a new one; namespaces signed with the old one are then yours to delete)."


def _read(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        raise SecretUnusable(f"cannot read ktest's key {path}: {error.strerror or error}. {_FIX}") from None
    with os.fdopen(fd, "rb") as file:
        found = os.fstat(file.fileno())
        key = file.read(_KEY_BYTES + 1)
    mode = stat.S_IMODE(found.st_mode)
    if not stat.S_ISREG(found.st_mode) or found.st_uid != os.getuid() or mode & 0o077:
        raise SecretUnusable(
            f"ktest's key {path} is not a private file of this user's (owner uid {found.st_uid}, "
            f"mode {mode:04o}): others may have read or made it. {_FIX}"
        )
    if len(key) != _KEY_BYTES:
        raise SecretUnusable(f"ktest's key {path} holds {len(key)} bytes, not {_KEY_BYTES}. {_FIX}")
    return key
