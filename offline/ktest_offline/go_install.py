"""Tools installed with ``go install module/package@version`` (kind, crictl) into ktest's cache.

Through the one Go runner (:mod:`ktest.assets.gotool`): the build writes into a
scratch directory next to the destination under the destination's file lock,
and the binary is renamed into place only once the build succeeded, so the
cache never holds a half-written binary. CoreDNS is built the same way with
``go build`` of a generated main module (:mod:`ktest_offline.node_image.coredns`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ktest.assets.gotool import GO_BUILD_FLAGS, GoTool, build_atomically, find_go, go_env, run_logged_go
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
