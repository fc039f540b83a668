"""The one Go runner: find ``go``, run a logged ``go`` command, build a file atomically,
``go install`` a tool into ktest's cache.

Every Go build ktest does goes through here: the user's Go operator
(:mod:`ktest.operators.go_operator`), the kind binary (:mod:`ktest.backends.kind.binary`) and, in
the separate ``ktest-offline`` distribution, Kubernetes, etcd, crictl and CoreDNS from Go
modules. A tool build writes into a scratch directory next to its destination under the
destination's file lock, and the binary is renamed into place only once the build succeeded,
so the cache never holds a half-written binary.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ktest.assets.progress import Progress
from ktest.base.bounded import file_lock
from ktest.base.process import run_captured
from ktest.errors import AssetsError, KindError, KtestError

# Flags of every release build: reproducible paths, no VCS stamping, no DWARF (it is stripped by
# ``-s -w`` at link time anyway; not generating it makes a cold build faster).
GO_BUILD_FLAGS = ("-trimpath", "-buildvcs=false", "-gcflags=all=-dwarf=false")
LOG_TAIL_LINES = 15
GO_TIMEOUT_SECONDS = 3600.0
BUILD_LOCK_TIMEOUT = 2 * GO_TIMEOUT_SECONDS
"""Seconds a build waits for another process building the same binary (at most two builds long)."""
PROXY_HINT = (
    "Check that the Go module proxy (GOPROXY) serves this version and that Go is "
    "recent enough, then run the command again."
)


@dataclass(frozen=True)
class GoTool:
    """The ``go`` command found on PATH and what it reports."""

    path: str
    version: str
    toolchain: str

    def go_version_tuple(self) -> tuple[int, ...]:
        return version_numbers(self.version.removeprefix("go"))


def version_numbers(text: str) -> tuple[int, ...]:
    """``(1, 25, 3)`` for ``1.25.3`` (or ``1.25rc1`` -> ``(1, 25)``): the leading numeric parts."""
    leading = re.match(r"\d+(?:\.\d+)*", text)
    return tuple(int(part) for part in leading.group().split(".")) if leading else ()


def find_go(env: Mapping[str, str] | None = None) -> GoTool | None:
    """The ``go`` on PATH, or None when there is none (or it does not run)."""
    env = os.environ if env is None else env
    path = shutil.which("go", path=env.get("PATH"))
    if path is None:
        return None
    try:
        finished = run_captured([path, "env", "GOVERSION", "GOTOOLCHAIN"], timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [*finished.stdout.splitlines(), "", ""]
    return GoTool(path=path, version=lines[0].strip(), toolchain=lines[1].strip())


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


def run_logged_go(
    command: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: Path,
    what: str,
    timeout: float,
    error: type[KtestError] = AssetsError,
    hint: str = "",
) -> None:
    """Run a ``go`` command with its output in ``log``; on failure raise ``error`` naming the
    command, the exit status or the cause, the log's last lines and path (then kept), and
    ``hint``; on success the log is removed (it is kept only when it explains a failure)."""
    verb = f"go {command[1]}" if len(command) > 1 else "go"
    with log.open("w") as out:
        try:
            finished = subprocess.run(
                list(command), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, timeout=timeout, check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as cause:
            raise error(f"{what}: `{verb}` failed: {cause} (log: {log})") from cause
    if finished.returncode != 0:
        raise error(
            f"{what}: `{verb}` exited with {finished.returncode}.\n"
            f"Last lines of the build log (full log: {log}):\n{log_tail(log)}" + (f"\n{hint}" if hint else "")
        )
    log.unlink(missing_ok=True)


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file, indented (or a note that it cannot be read)."""
    try:
        text = log.read_text(errors="replace")
    except OSError as cause:
        return f"  (cannot read {log}: {cause.strerror or cause})"
    return "\n".join(f"  {line}" for line in text.strip().splitlines()[-lines:])


def build_atomically(destination: Path, build: Callable[[Path, Path], Path]) -> Path:
    """``destination``, built by ``build(scratch, log)`` unless it is already there.

    Under the lock ``<destination>.lock``: ``build`` gets a fresh scratch directory
    next to ``destination`` (removed afterwards) and the log path ``<destination>.log``,
    and returns the file it made, which is renamed to ``destination``. Companion files
    ``build`` writes next to ``destination`` must come first: the binary marks the end.
    """
    destination.parent.mkdir(parents=True, exist_ok=True)
    lock = destination.with_name(destination.name + ".lock")
    with file_lock(lock, timeout=BUILD_LOCK_TIMEOUT, what=f"the build of {destination}", error=AssetsError):
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


def require_go(
    what: str, env: Mapping[str, str] | None = None, error: type[KtestError] = KindError
) -> GoTool:
    """The ``go`` tool, or ``error`` saying that ``what`` needs it (KindError: the tool builds
    are the kind binary's and the node images')."""
    go = find_go(env)
    if go is None:
        raise error(
            f"{what} needs the Go toolchain, but `go` is not on PATH.\n"
            "Install Go (https://go.dev/dl/) with access to a Go module proxy (GOPROXY), "
            "then run the command again."
        )
    return go


def run_go(
    command: list[str], scratch: Path, env: Mapping[str, str], log: Path, what: str,
    error: type[KtestError] = KindError,
) -> None:
    """One ``go`` command of a tool build in ``scratch``, logged to ``log``; ``error`` (with the
    log's tail and the module proxy hint) when it fails."""
    run_logged_go(
        command, cwd=scratch, env=env, log=log, what=what, timeout=GO_TIMEOUT_SECONDS, error=error,
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
