"""What the packaging tests share: the repository's root, the release check (scripts/ci/check-dist,
loaded as a module for its copy of the source tree)."""

from __future__ import annotations

from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
CHECK_DIST = ROOT / "scripts" / "ci" / "check-dist"


def _check_dist_module() -> ModuleType:
    loader = SourceFileLoader("ktest_check_dist", str(CHECK_DIST))
    module = ModuleType(loader.name)
    module.__file__ = str(CHECK_DIST)
    loader.exec_module(module)
    return module


def copy_tree(into: Path) -> Path:
    """A copy of the source tree to build from (a build writes ``*.egg-info`` into its source)."""
    copied: Path = _check_dist_module().copy_tree(into)
    return copied
