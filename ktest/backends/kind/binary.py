"""Find the ``kind`` binary, or build it from the Go module proxy into ktest's cache.

Order: ``KTEST_KIND`` (used as given), ``kind`` on PATH when it is the pinned
version, ktest's cache, else ``go install sigs.k8s.io/kind@<pinned>`` into
the cache (about half a minute; ktest has no download of kind, so this stays
in the core, online or not).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from ktest.assets.gotool import go_install, require_go
from ktest.assets.progress import Progress, as_progress
from ktest.backends.kind import recipe
from ktest.backends.kind.cache import KindCache
from ktest.errors import KindError

KIND_ENV = "KTEST_KIND"


def kind_version_of(binary: Path) -> str | None:
    """``v0.33.0`` from ``kind version`` (``kind v0.33.0 go1.26.8 linux/amd64``); None if it fails."""
    try:
        finished = subprocess.run(
            [str(binary), "version"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    words = finished.stdout.split()
    if finished.returncode != 0 or len(words) < 2 or words[0] != "kind":
        return None
    return words[1]


def resolve_kind(progress: bool | Progress = True, env: Mapping[str, str] | None = None) -> Path:
    """The kind binary to run (see the module docstring); raises KindError when none can be had."""
    env = os.environ if env is None else env
    progress = as_progress(progress)
    explicit = env.get(KIND_ENV)
    if explicit:
        path = Path(explicit).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise KindError(
                f"{KIND_ENV}={explicit} is not an executable file.\n"
                f"Point {KIND_ENV} at a kind binary, or unset it so ktest uses kind "
                f"{recipe.KIND_VERSION} from PATH or its cache (building it if needed)."
            )
        return path
    on_path = shutil.which("kind", path=env.get("PATH"))
    if on_path is not None:
        found = kind_version_of(Path(on_path))
        if found == recipe.KIND_VERSION:
            return Path(on_path)
        progress.note(
            f"not using {on_path}: it is kind {found or '(unknown version)'}, "
            f"ktest's node images are made for {recipe.KIND_VERSION}"
        )
    cached = KindCache.from_env(env).kind_binary(recipe.KIND_VERSION)
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    go = require_go(f"building kind {recipe.KIND_VERSION}", env)
    return go_install(
        go,
        f"{recipe.KIND_MODULE}@{recipe.KIND_VERSION}",
        "kind",
        cached,
        progress,
        f"building kind {recipe.KIND_VERSION} from Go modules, first time only",
    )
