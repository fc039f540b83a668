"""The offline builders as ktest sees them: one binary source and one node-image source.

Registered in this distribution's ``pyproject.toml`` under the entry-point groups
``ktest.binary_sources`` and ``ktest.node_image_sources``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ktest.assets.gotool import find_go
from ktest.assets.progress import Progress
from ktest.backends.kind.image_sources import NodeImageInfo


class GoModules:
    """Kubernetes and etcd built from the Go module proxy with the ``go`` on PATH."""

    name = "build"
    label = "build from Go modules"

    def unavailable(self) -> str | None:
        return None if find_go() is not None else "`go` is not on PATH"

    def install_kubernetes(self, version: str, destination: Path, progress: Progress) -> dict[str, Any]:
        from ktest.assets.store import Locations
        from ktest.errors import AssetsError
        from ktest_offline.kubernetes import KubernetesBuilder

        go = find_go()
        if go is None:
            raise AssetsError(f"building Kubernetes {version} needs the Go toolchain: `go` is not on PATH")
        progress.note(
            f"building Kubernetes {version} from Go modules with {go.version} "
            "(first time only; takes minutes)"
        )
        return KubernetesBuilder(go, Locations.from_env().gobuild_dir, progress).build(version, destination)

    def install_tool(self, name: str, version: str, destination: Path, progress: Progress) -> dict[str, Any]:
        """Build a tool of simulated nodes (kube-scheduler, kwok) into ``destination``."""
        from ktest.assets.gotool import require_go
        from ktest.errors import AssetsError
        from ktest_offline.node_tools import install_tool

        go = require_go(f"building {name} {version}", error=AssetsError)
        return install_tool(go, name, version, destination, progress)

    def remedy(self, version: str) -> str:
        return (
            "install Go (https://go.dev/dl/) with access to a Go module proxy, then "
            f"`ktest binaries install --k8s-version {shlex.quote(version)}` builds them once (minutes)."
        )


class OfflineNodeImages:
    """kind node images assembled from Go-built binaries and a Debian root file system."""

    name = "ktest-offline"

    def list_images(self, *, include_unusable: bool = False) -> Sequence[NodeImageInfo]:
        from ktest_offline.node_image import list_node_images

        return list_node_images(include_unusable=include_unusable)

    def build(self, k8s_version: str, *, force: bool, progress: Progress) -> str:
        from ktest_offline.node_image import build_node_image

        return build_node_image(k8s_version, force=force, progress=progress)
