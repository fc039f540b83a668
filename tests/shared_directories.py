"""A directory in /tmp, where other users may write, for tests of what ktest does on shared paths
(``import shared_directories``: tests/ is on ``sys.path``). pytest's ``tmp_path`` is private to
this user, so it is not what a shared path is."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def directory_in_tmp(prefix: str) -> Iterator[Path]:
    """A fresh directory under /tmp named ``<prefix>...``, removed with all it holds afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
