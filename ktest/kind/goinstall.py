"""Go builds into a cache directory, atomically, with a kept log.

kind and crictl are built with ``go install module/package@version``; CoreDNS
with ``go build`` of a generated main module (:mod:`ktest.kind.image.coredns`).
Either way the build writes into a scratch directory next to the destination
under the destination's file lock, and the binary is renamed into place only
once the build succeeded, so the cache never holds a half-written binary.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import filelock

from ktest.assets.gobuild import GO_BUILD_FLAGS, GoTool, find_go, run_logged_go
from ktest.assets.progress import Progress
from ktest.errors import KindError

GO_TIMEOUT_SECONDS = 3600.0
PROXY_HINT = (
    "Check that the Go module proxy (GOPROXY) serves this version and that Go is "
    "recent enough, then run the command again."
)


def require_go(what: str, env: Mapping[str, str] | None = None) -> GoTool:
    """The ``go`` tool, or KindError saying that ``what`` needs it."""
    go = find_go(env)
    if go is None:
        raise KindError(
            f"{what} needs the Go toolchain, but `go` is not on PATH.\n"
            "Install Go (https://go.dev/dl/) with access to a Go module proxy (GOPROXY), "
            "then run the command again."
        )
    return go


def go_env(extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a tool build: modules on, no workspace, go.mod updates allowed, static."""
    return {
        **os.environ,
        "GO111MODULE": "on",
        "GOWORK": "off",
        "GOFLAGS": "-mod=mod",
        "CGO_ENABLED": "0",
        **(extra_env or {}),
    }


def build_atomically(destination: Path, build: Callable[[Path, Path], Path]) -> Path:
    """``destination``, built by ``build(scratch, log)`` unless it is already there.

    Under the lock ``<destination>.lock``: ``build`` gets a fresh scratch directory
    next to ``destination`` (removed afterwards) and the log path ``<destination>.log``,
    and returns the file it made, which is renamed to ``destination``. Companion files
    ``build`` writes next to ``destination`` must come first: the binary marks the end.
    """
    destination.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(destination.with_name(destination.name + ".lock")))
    with lock:
        if destination.is_file() and os.access(destination, os.X_OK):
            return destination
        log = destination.with_name(destination.name + ".log")
        scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{destination.name}-", dir=destination.parent))
        try:
            built = build(scratch, log)
            os.replace(built, destination)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return destination


def run_go(command: list[str], scratch: Path, env: Mapping[str, str], log: Path, what: str) -> None:
    """One ``go`` command of a build in ``scratch``, logged to ``log``; KindError (with the log's
    tail and the module proxy hint) when it fails."""
    run_logged_go(
        command,
        cwd=scratch,
        env=env,
        log=log,
        what=what,
        timeout=GO_TIMEOUT_SECONDS,
        error=KindError,
        hint=PROXY_HINT,
    )


def go_install(
    go: GoTool,
    target: str,
    binary_name: str,
    destination: Path,
    progress: Progress,
    what: str,
    extra_env: Mapping[str, str] | None = None,
    ldflags: str = "",
) -> Path:
    """Run ``go install <target>`` (``pkg@version``) and move ``binary_name`` to ``destination``.

    ``destination`` is the final file path; ``ldflags`` are added to ``-s -w`` (e.g. ``-X`` version
    stamps). The build log stays next to it
    (``<destination>.log``); a failure raises KindError with the log's tail and path.
    """

    def install(scratch: Path, log: Path) -> Path:
        env = go_env({"GOBIN": str(scratch), **(extra_env or {})})
        command = [go.path, "install", *GO_BUILD_FLAGS, "-ldflags", f"-s -w {ldflags}".strip(), target]
        with progress.step(what):
            run_go(command, scratch, env, log, f"{what} ({target})")
        built = scratch / binary_name
        if not built.is_file():
            raise KindError(
                f"{what}: `go install {target}` succeeded but produced no {binary_name!r} "
                f"in {scratch} (log: {log})."
            )
        return built

    return build_atomically(destination, install)
