"""Check a restored ktest binary cache before it is used: ``binary_cache.py --k8s-version 1.37.2``.

A restore key may bring back another patch version's binaries (a partial key
match) or a damaged entry. The wanted entry is verified with ``ktest binaries
verify``; ``usable=false`` tells the action to install it. With
``--prune-other-versions`` (the action, on a fresh runner) entries of other
versions are removed, so they are not saved again under this version's key.
Only finished entries (``<version>-linux-<arch>``) are ever removed: never the
lock files or the temporary directory of an install in progress, and never
without the flag (on a developer's machine other versions are wanted).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gha import CIError, fail, notice, set_outputs

ENTRY_SEPARATOR = "-linux-"
_ENTRY = re.compile(r"^(\d+\.\d+\.\d+)-linux-[a-z0-9]+$")


def cache_root(env: dict[str, str] | None = None) -> Path:
    """ktest's cache directory, as ktest computes it (KTEST_CACHE_DIR, XDG_CACHE_HOME, ~/.cache)."""
    env = dict(os.environ) if env is None else env
    if env.get("KTEST_CACHE_DIR"):
        return Path(env["KTEST_CACHE_DIR"]).expanduser()
    cache_home = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache_home / "ktest"


def entry_version(entry: Path) -> str | None:
    """``1.37.2`` for ``k8s/1.37.2-linux-amd64``; None for anything else (locks, installs in progress)."""
    match = _ENTRY.match(entry.name)
    return match.group(1) if match else None


def foreign_entries(root: Path, version: str) -> list[Path]:
    """Finished entries under ``root/k8s`` of versions other than ``version``."""
    k8s = root / "k8s"
    if not k8s.is_dir():
        return []
    return sorted(
        path
        for path in k8s.iterdir()
        if path.is_dir() and not path.is_symlink() and entry_version(path) not in (None, version)
    )


def wanted_entry(root: Path, version: str) -> Path | None:
    k8s = root / "k8s"
    if not k8s.is_dir():
        return None
    found = [path for path in k8s.glob(f"{version}{ENTRY_SEPARATOR}*") if path.is_dir()]
    return found[0] if found else None


def verify(version: str, ktest: Sequence[str]) -> tuple[bool, str]:
    """``ktest binaries verify --k8s-version V``: (intact, its output)."""
    command = [*ktest, "binaries", "verify", "--k8s-version", version]
    try:
        finished = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise CIError(f"could not run {' '.join(command)}: {error}") from error
    return finished.returncode == 0, (finished.stdout + finished.stderr).strip()


def check(root: Path, version: str, matched_key: str, ktest: Sequence[str], *, prune: bool = False) -> bool:
    """True when ``version``'s entry is present and intact; ``prune`` removes other versions' entries."""
    for path in foreign_entries(root, version):
        action = "removed" if prune else "left alone"
        notice(
            f"restored cache ({matched_key or 'no key'}) holds {path.name}, not Kubernetes {version}: "
            f"not used, {action}"
        )
        if prune:
            shutil.rmtree(path)
    if wanted_entry(root, version) is None:
        return False
    intact, report = verify(version, ktest)
    if not intact:
        notice(f"restored Kubernetes {version} binaries failed verification; installing again:\n{report}")
    return intact


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k8s-version", required=True, help="the exact resolved version, e.g. 1.37.2")
    parser.add_argument("--matched-key", default="", help="the cache key actions/cache restored")
    parser.add_argument("--ktest", default="ktest")
    parser.add_argument(
        "--prune-other-versions",
        action="store_true",
        help="remove other versions' entries (CI runners only: a developer's cache keeps them)",
    )
    args = parser.parse_args(argv)
    try:
        prune = args.prune_other_versions
        usable = check(cache_root(), args.k8s_version, args.matched_key, args.ktest.split(), prune=prune)
    except CIError as error:
        return fail(error)
    set_outputs({"usable": "true" if usable else "false"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
