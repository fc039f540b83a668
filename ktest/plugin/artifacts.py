"""The artifacts directory (``--ktest-artifacts``, default ``.ktest-artifacts`` in the rootdir):
where failure timelines, a failed run's cluster logs and folded operator logs go.

Like ``.pytest_cache``, a directory ktest makes ignores itself: it holds a ``.gitignore`` of
``*``, so nothing in it lands in the project's git tree. A directory the user named that already
existed is theirs and is left as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from pathlib import Path

DEFAULT_NAME = ".ktest-artifacts"
GITIGNORE = "# Created by ktest: its artifacts (timelines, logs) are not sources.\n*\n"


def artifacts_root(chosen: Path | None, rootdir: Path) -> Path:
    """The artifacts directory of a run (not created): the setting, else the default in the rootdir."""
    return chosen or rootdir / DEFAULT_NAME


def prepare(root: Path, directory: Path) -> Path:
    """Create ``directory`` (inside the artifacts directory ``root``) and, where ktest makes
    ``root`` or it is the default one, its ``.gitignore``; returns ``directory``."""
    made_here = not root.exists()
    directory.mkdir(parents=True, exist_ok=True)
    if made_here or root.name == DEFAULT_NAME:
        ignore = root / ".gitignore"
        if not ignore.exists():
            with contextlib.suppress(OSError):  # a read-only directory still takes no .gitignore
                ignore.write_text(GITIGNORE)
    return directory


def safe_name(name: str) -> str:
    """A test's node id (or a section title) as a file name: ``/`` and ``::`` as ``_``, and, when
    anything else had to go (``test[a/b]``, ``test[a b]``) or the name is long, a hash of the whole
    name after it, so two tests never share a file."""
    readable = name.replace("::", "_").replace("/", "_")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", readable).strip("_.") or "test"
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    if len(safe) > 120:
        return safe[:100] + "-" + digest
    return f"{safe}-{digest}" if safe != readable else safe
