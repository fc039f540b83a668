"""The result of resolving binaries: a directory and the version it holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ktest.errors import AssetsError

REQUIRED_BINARIES = ("kube-apiserver", "etcd")
OPTIONAL_BINARIES = ("kube-controller-manager", "kubectl")
ALL_BINARIES = REQUIRED_BINARIES + OPTIONAL_BINARIES


@dataclass(frozen=True)
class Assets:
    """A directory of control-plane binaries for one Kubernetes version.

    ``origin`` says where it came from (``KTEST_ASSETS``, ``setup-envtest``,
    ``cache``, ``download``, ``build``), for messages and ``ktest binaries path``.
    """

    directory: Path
    version: str
    origin: str = "cache"
    missing: tuple[str, ...] = field(default=())

    def has(self, name: str) -> bool:
        return (self.directory / name).is_file()

    def binary(self, name: str) -> Path:
        path = self.directory / name
        if not path.is_file():
            raise AssetsError(
                f"{name} is not in {self.directory} (binaries from {self.origin}).\n"
                f"Put a {name} binary there, or unset KTEST_ASSETS/KUBEBUILDER_ASSETS "
                "so that ktest installs a complete set with `ktest binaries install`."
            )
        return path
