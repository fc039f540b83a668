"""Build a Go operator (e.g. a controller-runtime manager) once and cache the binary.

The cache key hashes the module's Go sources (``*.go`` without tests, ``go.mod``, ``go.sum``,
``go.work*``, ``vendor/modules.txt``), the Go version, the platform, the package and the build
flags, so an unchanged operator is never rebuilt, across runs and xdist workers. It is built like
the user's own ``go build`` (same environment, so a warm ``GOCACHE`` is reused; only
``-buildvcs=false`` added); ``reproducible=True`` adds ``-trimpath`` and ``CGO_ENABLED=0``. The
binary goes to ``<ktest cache>/operators/<name>-<hash>/<name>`` (renamed into place under a file
lock), the compiler's output to ``build.log`` beside it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import filelock

from ktest.errors import OperatorError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ktest.assets.progress import Progress

_SOURCE_NAMES = frozenset({"go.mod", "go.sum", "go.work", "go.work.sum"})
_SKIP_DIRECTORIES = frozenset({"bin", "dist", "testdata", "node_modules"})
_LOG_TAIL_LINES = 30


def source_files(source_dir: Path) -> Iterator[Path]:
    """The files whose content decides the binary, in a stable order."""
    for root, directories, files in os.walk(source_dir):
        directories[:] = sorted(
            d for d in directories if not d.startswith((".", "_")) and d not in _SKIP_DIRECTORIES
        )
        for file in sorted(files):
            path = Path(root) / file
            relative = path.relative_to(source_dir)
            if (
                file in _SOURCE_NAMES
                or relative.as_posix() == "vendor/modules.txt"
                or (file.endswith(".go") and not file.endswith("_test.go"))
            ):
                yield path


@dataclass(frozen=True)
class GoBuild:
    """Where the binary of one Go package goes for the current sources, and how it is built."""

    source: Path
    binary: Path
    command: tuple[str, ...]
    env: Mapping[str, str]

    @property
    def cached(self) -> bool:
        return self.binary.is_file() and os.access(self.binary, os.X_OK)

    @property
    def log(self) -> Path:
        """The output of the last build (``go build -v``: the packages compiled, errors)."""
        return self.binary.parent / "build.log"


class GoBuildOptions(TypedDict, total=False):
    """How :func:`plan_go_build` and :func:`build_go_binary` build, declared once.

    ``package``: the main package below the module (default ``.``); ``name``: the binary's
    name; ``ldflags``, ``tags``: as for ``go build``; ``env``: added to the build's
    environment; ``cache_dir``: where binaries are kept (default ``~/.cache/ktest/operators``);
    ``reproducible``: ``-trimpath`` and ``CGO_ENABLED=0``."""

    package: str
    name: str | None
    ldflags: str
    tags: Sequence[str]
    env: Mapping[str, str] | None
    cache_dir: Path | str | None
    reproducible: bool


def plan_go_build(
    source_dir: Path | str,
    *,
    package: str = ".",
    name: str | None = None,
    ldflags: str = "",
    tags: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cache_dir: Path | str | None = None,
    reproducible: bool = False,
) -> GoBuild:
    """The cache location and build command for ``package`` of the Go module at ``source_dir``."""
    from ktest.assets.gotool import find_go
    from ktest.assets.store import Locations

    source = Path(source_dir).expanduser().resolve()
    if not (source / "go.mod").is_file():
        raise OperatorError(
            f"{source} has no go.mod; pass the directory of the operator's Go module "
            "(the one holding go.mod), and package= for a main package below it (e.g. './cmd')."
        )
    build_env = {**os.environ, **(env or {}), "GO111MODULE": "on"}
    if reproducible:
        build_env["CGO_ENABLED"] = "0"
    go = find_go(build_env)
    if go is None:
        raise OperatorError(
            "the 'go' command was not found on PATH (or does not run), so the Go operator in "
            f"{source} cannot be built. Install Go (https://go.dev/dl/) or put it on PATH."
        )
    binary_name = name or (Path(package).name if package not in (".", "./") else source.name)
    flags = ["-trimpath", "-buildvcs=false"] if reproducible else ["-buildvcs=false"]
    if tags:
        flags.append(f"-tags={','.join(tags)}")
    if ldflags:
        flags.append(f"-ldflags={ldflags}")
    cgo = f"CGO_ENABLED={build_env.get('CGO_ENABLED', '')}"
    digest = _digest(source, go.version, package, [*flags, cgo], build_env)
    default_root = Locations.from_env(build_env).cache_root / "operators"  # KTEST_CACHE_DIR, XDG_CACHE_HOME
    root = Path(cache_dir) if cache_dir is not None else default_root
    binary = root / f"{binary_name}-{digest[:16]}" / binary_name
    return GoBuild(source, binary, (go.path, "build", "-v", *flags, "-o", "{output}", package), build_env)


def build_go_binary(
    source_dir: Path | str,
    *,
    timeout: float = 1800.0,
    progress: bool | Progress = True,
    **how: Unpack[GoBuildOptions],
) -> Path:
    """The path of the built binary of ``package`` in the Go module at ``source_dir``.

    Built only when no binary for the same sources, Go version and flags is
    cached; while it builds, progress lines on stderr name the binary, the log and
    the time taken (``progress=False`` silences them). Raises ``OperatorError``
    with the compiler's output when the build fails. How to build: :class:`GoBuildOptions`.
    """
    from ktest.assets.progress import as_progress

    plan = plan_go_build(source_dir, **how)
    if plan.cached:
        return plan.binary
    report = as_progress(progress)
    entry = plan.binary.parent
    entry.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(entry) + ".lock"):
        if plan.cached:  # another process built it while we waited
            return plan.binary
        entry.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{plan.binary.name}-", dir=entry)
        os.close(handle)
        command = [temporary if part == "{output}" else part for part in plan.command]
        report.note(
            f"building Go operator {plan.binary.name} from {plan.source} (once; cached afterwards): "
            f"binary {plan.binary}, log {plan.log}"
        )
        try:
            with report.step(f"building Go operator {plan.binary.name}"):
                _run_build(command, plan, timeout)
            os.chmod(temporary, 0o755)
            os.replace(temporary, plan.binary)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
    return plan.binary


def _run_build(command: list[str], plan: GoBuild, timeout: float) -> None:
    started = time.monotonic()
    source = plan.source
    try:
        with plan.log.open("w") as log:
            log.write(f"$ {shlex.join(command)}\n")
            log.flush()
            finished = subprocess.run(
                command,
                cwd=source,
                env=dict(plan.env),
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise OperatorError(
            f"building the Go operator in {source} took longer than {timeout:g} s and was stopped.\n"
            f"Command: {shlex.join(command)}\nLog: {plan.log}\n"
            "Pass a larger timeout= on a slow or busy machine."
        ) from None
    except OSError as error:
        raise OperatorError(f"could not run {shlex.join(command)}: {error}") from None
    if finished.returncode != 0:
        output = [line for line in plan.log.read_text(errors="replace").splitlines()[1:] if line.strip()]
        tail = "\n".join(output[-_LOG_TAIL_LINES:])
        raise OperatorError(
            f"building the Go operator in {source} failed (exit status {finished.returncode} after "
            f"{time.monotonic() - started:.0f} s).\nCommand: {shlex.join(command)}\n"
            f"--- go build output (all of it in {plan.log}) ---\n{tail}\n--- end ---\n"
            "Fix the compile error above; if a module is missing, run 'go mod tidy' in that directory."
        )


def _digest(source: Path, go_version: str, package: str, flags: Sequence[str], env: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    goos = env.get("GOOS") or platform.system().lower()
    goarch = env.get("GOARCH") or _machine()
    for part in (go_version, goos, goarch, package, *flags):
        digest.update(part.encode() + b"\0")
    for path in source_files(source):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _machine() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
