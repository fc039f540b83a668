"""Ask a binary which version it is, to check an install before trusting it."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from ktest.base.process import run_captured
from ktest.errors import AssetsError

_VERSION_ARGS = {
    "kube-apiserver": ("--version",),
    "kube-controller-manager": ("--version",),
    "kubectl": ("version", "--client"),
    "etcd": ("--version",),
}
_KUBECTL_RE = re.compile(r"Client Version:\s*v(\S+)")
_KUBERNETES_RE = re.compile(r"\bv(\d+\.\d+\.\d+\S*)")
_ETCD_RE = re.compile(r"etcd Version:\s*(\S+)")


def reported_version(path: Path, name: str, timeout: float = 60.0) -> str:
    """The version ``path`` reports, without a leading ``v`` (``"1.37.2"``, etcd: ``"3.7.0"``).

    ``name`` says which of the four binaries it is, because each reports differently.
    """
    command = [str(path), *_VERSION_ARGS[name]]
    try:
        finished = run_captured(command, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise AssetsError(
            f"{path} could not run `{' '.join(command[1:])}`: {error}.\n"
            f"It is not a working {name} for this machine; remove it or point ktest elsewhere."
        ) from error
    output = finished.stdout + finished.stderr
    patterns = [_ETCD_RE] if name == "etcd" else [_KUBECTL_RE, _KUBERNETES_RE]
    for pattern in patterns:
        match = pattern.search(output)
        if match is not None and finished.returncode == 0:
            return match.group(1)
    excerpt = output.strip().splitlines()[:3]
    raise AssetsError(
        f"{path} did not report a version for `{' '.join(command[1:])}` "
        f"(exit code {finished.returncode}, output: {excerpt!r}).\n"
        f"It is not a working {name}; remove it or point ktest at another directory."
    )


def verify_binaries(
    directory: Path,
    version: str,
    names: Iterable[str],
    etcd_version: str | None = None,
) -> dict[str, str]:
    """Check that each binary in ``directory`` reports ``version`` (etcd: ``etcd_version``).

    Returns the version each binary reported. ``etcd_version=None`` accepts any
    etcd that runs (downloaded envtest archives do not say which etcd they hold).
    """
    reported: dict[str, str] = {}
    for name in names:
        found = reported_version(directory / name, name)
        expected = etcd_version if name == "etcd" else version
        if expected is not None and found != expected:
            raise AssetsError(
                f"{directory / name} reports version {found}, but {expected} was requested.\n"
                "The binary does not match the release it was installed for; nothing was "
                "installed. Report this if it happens again."
            )
        reported[name] = found
    return reported
