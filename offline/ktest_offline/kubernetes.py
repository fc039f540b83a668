"""Build the control-plane binaries from Go modules (no release site needed).

Kubernetes: a generated consumer module requires ``k8s.io/kubernetes vX.Y.Z``
and replaces every staging module (read from the published go.mod, where they
point at ``./staging/src/...``) with ``k8s.io/<name> v0.Y.Z``; a ``tools.go``
keeps the three commands in the module graph. Binaries are built with
``CGO_ENABLED=0 -trimpath`` and ``-ldflags -X`` stamping the real version so
``--version`` and ``/version`` report ``vX.Y.Z``.

etcd: a second consumer module requires ``go.etcd.io/etcd/server/v3`` at the
release the Kubernetes minor's kubeadm runs (:data:`ETCD_SERVER_RELEASES`, the
one Kubernetes' own CI tests against), else the version its go.mod requires.
A kind node image of the same version then reuses this etcd instead of building
another one.

All commands of one build are one ``go build`` invocation, so Go compiles their
shared packages once and links them side by side.

Workspaces live under ``<cache>/ktest/gobuild/`` and are reused, so a later
build of the same version only re-links from the Go build cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from ktest.assets.gotool import GO_BUILD_FLAGS, LOG_TAIL_LINES, GoTool, run_logged_go, version_numbers
from ktest.assets.minors import MINORS
from ktest.assets.progress import Progress
from ktest.errors import AssetsError

KUBERNETES_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"
KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kubectl")
# Every command of k8s.io/kubernetes ktest builds: ``ktest binaries`` builds the three above, a kind
# node image also the rest. All are in one consumer module so one ``go mod tidy`` serves both.
KUBERNETES_MODULE_COMMANDS = (
    *KUBERNETES_COMMANDS, "kubelet", "kubeadm", "kube-scheduler", "kube-proxy"
)
# The etcd server release each minor's kubeadm runs (ktest/assets/minors.py). The go.mod only
# names the client library's version (e.g. 3.6.5 for 1.35, whose kubeadm runs 3.6.6).
ETCD_SERVER_RELEASES = {minor: facts.etcd for minor, facts in MINORS.items()}
_ETCD_REQUIREMENTS = (ETCD_MODULE, "go.etcd.io/etcd/client/v3", "go.etcd.io/etcd/api/v3")
_VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
# The module proxy does not say which git commit a release was tagged from.
PLACEHOLDER_COMMIT = "0" * 40


@dataclass(frozen=True)
class KubernetesModule:
    """What the published ``k8s.io/kubernetes`` go.mod of one release tells us."""

    version: str
    release_time: str
    go_directive: str
    godebug: tuple[tuple[str, str], ...]
    staging: tuple[str, ...]
    etcd_version: str

    @property
    def etcd_server_version(self) -> str:
        """The etcd to run with this release: what its kubeadm runs when known, else the go.mod's."""
        minor = ".".join(self.version.split(".")[:2])
        return ETCD_SERVER_RELEASES.get(minor, self.etcd_version)


def _go_env() -> dict[str, str]:
    return {**os.environ, "GO111MODULE": "on", "GOWORK": "off", "CGO_ENABLED": "0"}


def _run_go(go: GoTool, args: Sequence[str], cwd: Path, what: str, timeout: float = 600) -> str:
    try:
        finished = subprocess.run(
            [go.path, *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_go_env(),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AssetsError(f"{what} failed: {error}") from error
    if finished.returncode != 0:
        detail = "\n".join(finished.stderr.strip().splitlines()[-LOG_TAIL_LINES:])
        raise AssetsError(f"{what} failed:\n{detail}")
    return finished.stdout


def module_info(go: GoTool, module: str, version: str, cwd: Path) -> dict[str, Any]:
    """``go list -m -json module@version``: fetches only .info and .mod from the proxy."""
    try:
        output = _run_go(
            go, ["list", "-m", "-json", f"{module}@{version}"], cwd, f"looking up {module}@{version}"
        )
    except AssetsError as error:
        if "unknown revision" in str(error) or "invalid version" in str(error):
            raise AssetsError(
                f"{module} {version} is not on the Go module proxy "
                f"({os.environ.get('GOPROXY') or 'default GOPROXY'}): is the version right?"
            ) from error
        raise
    info: dict[str, Any] = json.loads(output)
    return info


def read_kubernetes_module(go: GoTool, version: str, workspace: Path) -> KubernetesModule:
    """Read the staging modules, godebug settings and etcd version from the release's go.mod."""
    info = module_info(go, KUBERNETES_MODULE, f"v{version}", workspace)
    gomod = info.get("GoMod")
    if not gomod:
        raise AssetsError(f"the Go module proxy returned no go.mod for {KUBERNETES_MODULE} v{version}")
    parsed = json.loads(
        _run_go(go, ["mod", "edit", "-json", gomod], workspace, f"reading {gomod}")
    )
    staging = tuple(
        sorted(
            item["Old"]["Path"]
            for item in parsed.get("Replace") or []
            if item["Old"]["Path"].startswith("k8s.io/")
            and item["New"]["Path"].startswith("./staging/")
        )
    )
    if not staging:
        raise AssetsError(
            f"{KUBERNETES_MODULE} v{version}'s go.mod has no ./staging replacements; "
            "ktest cannot build this release from Go modules."
        )
    requirements = {item["Path"]: item["Version"] for item in parsed.get("Require") or []}
    etcd_version = next(
        (requirements[m] for m in _ETCD_REQUIREMENTS if m in requirements), None
    )
    if etcd_version is None:
        raise AssetsError(
            f"{KUBERNETES_MODULE} v{version}'s go.mod does not require any of "
            f"{', '.join(_ETCD_REQUIREMENTS)}; cannot tell which etcd it expects."
        )
    godebug = tuple(
        (item["Key"], item["Value"]) for item in parsed.get("GoDebug") or parsed.get("Godebug") or []
    )
    return KubernetesModule(
        version=version,
        release_time=str(info.get("Time") or ""),
        go_directive=str(parsed.get("Go") or info.get("GoVersion") or ""),
        godebug=godebug,
        staging=staging,
        etcd_version=etcd_version.removeprefix("v"),
    )


def kubernetes_go_mod(module: KubernetesModule) -> str:
    """The consumer go.mod for one Kubernetes release (before ``go mod tidy``)."""
    major, minor, patch = module.version.split(".")
    lines = [
        f"// Generated by ktest to build Kubernetes v{module.version} from Go modules.",
        f"module ktest.local/kubernetes-v{module.version}",
        "",
        f"go {module.go_directive}",
        "",
    ]
    if module.godebug:
        lines += ["godebug (", *(f"\t{k}={v}" for k, v in module.godebug), ")", ""]
    lines += [f"require {KUBERNETES_MODULE} v{module.version}", "", "replace ("]
    lines += [f"\t{path} => {path} v0.{minor}.{patch}" for path in module.staging]
    lines += [")", ""]
    del major
    return "\n".join(lines)


def _tools_go(packages: Sequence[str]) -> str:
    imports = "\n".join(f'\t_ "{package}"' for package in packages)
    return (
        "//go:build tools\n\n"
        "// Package tools keeps the commands ktest builds in the module graph.\n"
        f"package tools\n\nimport (\n{imports}\n)\n"
    )


def _etcd_go_mod(etcd_version: str, go_directive: str) -> str:
    return (
        f"// Generated by ktest to build etcd v{etcd_version} from Go modules.\n"
        f"module ktest.local/etcd-v{etcd_version}\n\n"
        f"go {go_directive}\n\n"
        f"require {ETCD_MODULE} v{etcd_version}\n"
    )


class KubernetesBuilder:
    """Builds one Kubernetes release's binaries into a directory, with progress."""

    def __init__(self, go: GoTool, workspace_root: Path, progress: Progress) -> None:
        self.go = go
        self.workspace_root = workspace_root
        self.progress = progress

    def build(self, version: str, destination: Path) -> dict[str, Any]:
        """Build kube-apiserver, kube-controller-manager, kubectl and etcd into ``destination``."""
        module = self.kubernetes_module(version)
        durations = self.build_kubernetes(module, KUBERNETES_COMMANDS, destination)
        durations.update(
            self.build_etcd(
                module.etcd_server_version, destination / "etcd", f"for Kubernetes v{version}"
            )
        )
        return {
            "etcd_version": module.etcd_server_version,
            "go_version": self.go.version,
            "build_seconds": {k: round(v, 1) for k, v in durations.items()},
            "git_commit": PLACEHOLDER_COMMIT,
            "build_date": module.release_time,
            "staging_modules": len(module.staging),
        }

    def kubernetes_module(self, version: str) -> KubernetesModule:
        """Read the release's go.mod from the proxy; AssetsError if this Go cannot build it."""
        self.workspace_root.mkdir(parents=True, exist_ok=True)
        module = read_kubernetes_module(self.go, version, self.workspace_root)
        self._check_go_version(module)
        return module

    def build_kubernetes(
        self, module: KubernetesModule, names: Sequence[str], destination: Path
    ) -> dict[str, float]:
        """Build the ``k8s.io/kubernetes/cmd/<name>`` commands into ``destination``; seconds per step."""
        version = module.version
        durations: dict[str, float] = {}
        workspace = self.workspace_root / f"kubernetes-v{version}"
        lock = _workspace_lock(workspace)
        try:
            lock.acquire(timeout=0.2)
        except filelock.Timeout:
            self.progress.note(
                f"another process is building in {workspace}; waiting for it (lock {lock.lock_file})"
            )
            lock.acquire()
        try:
            durations["prepare kubernetes module"] = self._prepare(
                workspace,
                kubernetes_go_mod(module),
                [f"{KUBERNETES_MODULE}/cmd/{name}" for name in KUBERNETES_MODULE_COMMANDS],
                f"preparing Go modules for Kubernetes v{version} (go mod tidy)",
            )
            durations["+".join(names)] = self._go_build(
                workspace,
                [f"{KUBERNETES_MODULE}/cmd/{name}" for name in names],
                destination,
                self._kubernetes_ldflags(module),
                f"building {', '.join(names)} v{version} from Go modules, first time only",
            )
        finally:
            lock.release()
        return durations

    def build_etcd(self, etcd_version: str, output: Path, purpose: str) -> dict[str, float]:
        """Build etcd ``etcd_version`` (no leading v) to the file ``output``; seconds per step."""
        durations: dict[str, float] = {}
        etcd_info = module_info(self.go, ETCD_MODULE, f"v{etcd_version}", self.workspace_root)
        etcd_workspace = self.workspace_root / f"etcd-v{etcd_version}"
        with _workspace_lock(etcd_workspace):
            durations["prepare etcd module"] = self._prepare(
                etcd_workspace,
                _etcd_go_mod(etcd_version, str(etcd_info.get("GoVersion") or "1.22")),
                [ETCD_MODULE],
                f"preparing Go modules for etcd v{etcd_version} (go mod tidy)",
            )
            durations["etcd"] = self._go_build(
                etcd_workspace,
                [ETCD_MODULE],
                output,
                "-s -w",
                f"building etcd v{etcd_version} ({purpose}) from Go modules, first time only",
            )
        return durations

    def _check_go_version(self, module: KubernetesModule) -> None:
        needed = version_numbers(module.go_directive)
        have = self.go.go_version_tuple()
        if have and needed and have < needed and self.go.toolchain.startswith("local"):
            raise AssetsError(
                f"Kubernetes v{module.version} needs Go >= {module.go_directive}, but {self.go.path} "
                f"is {self.go.version} and GOTOOLCHAIN=local forbids fetching a newer one.\n"
                f"Install Go {module.go_directive} or newer, or set GOTOOLCHAIN=auto."
            )

    @staticmethod
    def _kubernetes_ldflags(module: KubernetesModule) -> str:
        major, minor, _ = module.version.split(".")
        values = {
            "gitVersion": f"v{module.version}",
            "gitMajor": major,
            "gitMinor": minor,
            "gitCommit": PLACEHOLDER_COMMIT,
            "gitTreeState": "clean",
            "buildDate": module.release_time,
        }
        flags = ["-s", "-w"]
        for package in _VERSION_PACKAGES:
            flags += [f"-X {package}.{key}={value}" for key, value in values.items() if value]
        return " ".join(flags)

    def _prepare(self, workspace: Path, go_mod: str, packages: list[str], message: str) -> float:
        """Write the consumer module; run ``go mod tidy`` only when its inputs changed."""
        workspace.mkdir(parents=True, exist_ok=True)
        inputs = go_mod + _tools_go(packages)
        marker = workspace / ".ktest-inputs"
        if (
            marker.is_file()
            and marker.read_text() == inputs
            and (workspace / "go.sum").is_file()
        ):
            return 0.0
        marker.unlink(missing_ok=True)
        (workspace / "go.mod").write_text(go_mod)
        (workspace / "go.sum").unlink(missing_ok=True)
        (workspace / "tools.go").write_text(_tools_go(packages))
        started = time.monotonic()
        with self.progress.step(message):
            self._logged_go(["mod", "tidy"], workspace, workspace / "tidy.log", message, 1800)
        marker.write_text(inputs)
        return time.monotonic() - started

    def _go_build(
        self, workspace: Path, packages: Sequence[str], output: Path, ldflags: str, message: str
    ) -> float:
        """One ``go build`` of ``packages``: into the file ``output`` for one package, else into
        the directory ``output`` (one binary per command, named after it)."""
        started = time.monotonic()
        target = str(output) if len(packages) == 1 else f"{output}{os.sep}"
        args = ["build", *GO_BUILD_FLAGS, "-ldflags", ldflags, "-o", target, *packages]
        commands = "+".join(package.rsplit("/", 1)[-1] for package in packages)
        log = workspace / f"build-{output.name if len(packages) == 1 else commands}.log"
        with self.progress.step(message):
            self._logged_go(args, workspace, log, message, 7200)
        return time.monotonic() - started

    def _logged_go(
        self, args: list[str], cwd: Path, log: Path, what: str, timeout: float
    ) -> None:
        run_logged_go([self.go.path, *args], cwd=cwd, env=_go_env(), log=log, what=what, timeout=timeout)


def _workspace_lock(workspace: Path) -> filelock.FileLock:
    """The workspace's lock file, in one ``.locks`` directory rather than beside every workspace."""
    locks = workspace.parent / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    return filelock.FileLock(str(locks / f"{workspace.name}.lock"))
