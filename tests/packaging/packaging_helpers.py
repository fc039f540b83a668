"""What the packaging tests share: the repository's root, the release check, a copy of the source tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK_DIST = ROOT / "scripts" / "ci" / "check-dist"


def source_files() -> list[str]:
    """What a clean clone holds: the tracked files, and new ones not yet committed (not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def copy_tree(into: Path) -> Path:
    """A copy of the source tree to build from (a build writes ``*.egg-info`` into its source)."""
    for name in source_files():
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, into / name)
    return into
