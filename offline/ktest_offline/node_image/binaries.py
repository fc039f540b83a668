"""Every binary a node image holds, built once and cached.

* kube-apiserver, kube-controller-manager, kubectl, etcd: ktest's binary cache
  (``ktest binaries``), reused as they are; etcd is built separately only when
  kubeadm expects another etcd release than the one the Kubernetes go.mod requires.
* kubelet, kubeadm, kube-scheduler, kube-proxy: the same Go workspace and build
  cache as ``ktest binaries``, into ``<cache>/kind/k8s/<version>-linux-<arch>/``.
* crictl: ``go install`` at the recipe's version; CoreDNS: the recipe's version with a lean
  plugin set (:mod:`ktest_offline.node_image.coredns`); pause: our own C program.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ktest.assets import resolve_assets
from ktest.assets.gotool import go_install, require_go
from ktest.assets.progress import Progress, holding_lock
from ktest.assets.store import read_cache_entry
from ktest.backends.kind import recipe
from ktest.backends.kind.cache import KindCache
from ktest.errors import AssetsError, KindError
from ktest_offline.kubernetes import KubernetesBuilder
from ktest_offline.node_image.coredns import coredns_binary
from ktest_offline.node_image.pause import build_pause

NODE_METADATA_FILE = "ktest-node-binaries.json"
CONTROL_PLANE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kubectl", "etcd")


@dataclass(frozen=True)
class NodeBinaries:
    """Paths of every binary that goes into a node image for one Kubernetes version."""

    version: str
    paths: dict[str, Path]

    def __getitem__(self, name: str) -> Path:
        return self.paths[name]


def control_plane_binaries(version: str, progress: Progress) -> dict[str, Path]:
    """kube-apiserver, kube-controller-manager, kubectl, etcd from ktest's binaries (built if needed)."""
    try:
        assets = resolve_assets(version, progress=progress)
    except AssetsError as error:
        raise KindError(
            f"the node image needs Kubernetes {version}'s control-plane binaries: {error}"
        ) from error
    missing = [name for name in CONTROL_PLANE_BINARIES if not (assets.directory / name).is_file()]
    if missing:
        raise KindError(
            f"the Kubernetes {version} binaries ktest found in {assets.directory} ({assets.origin}) lack "
            f"{', '.join(missing)}, which a node image needs.\n"
            f"Unset KTEST_ASSETS/KUBEBUILDER_ASSETS or run `ktest binaries install --k8s-version {version} "
            "--source build` so ktest's cache holds a complete set."
        )
    return {name: assets.directory / name for name in CONTROL_PLANE_BINARIES}


def _installed_etcd_version(version: str, cache: KindCache) -> str | None:
    entry = read_cache_entry(cache.locations, version)
    if entry is None:
        return None
    reported = entry.metadata.get("reported_versions") or {}
    return str(reported.get("etcd") or entry.metadata.get("etcd_version") or "") or None


def kubernetes_node_binaries(version: str, cache: KindCache, progress: Progress) -> dict[str, Path]:
    """kubelet, kubeadm, kube-scheduler, kube-proxy for ``version`` (built into the kind cache once)."""
    directory = cache.node_binaries(version)
    names = recipe.NODE_COMMANDS
    paths = {name: directory / name for name in names}
    if (directory / NODE_METADATA_FILE).is_file() and all(p.is_file() for p in paths.values()):
        return paths
    directory.parent.mkdir(parents=True, exist_ok=True)
    with holding_lock(
        directory.with_name(directory.name + ".lock"),
        progress,
        f"another process is building Kubernetes {version}'s node binaries",
    ):
        if (directory / NODE_METADATA_FILE).is_file() and all(p.is_file() for p in paths.values()):
            return paths
        go = require_go(f"building Kubernetes {version}'s node binaries")
        builder = KubernetesBuilder(go, cache.locations.gobuild_dir, progress)
        scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{directory.name}-", dir=directory.parent))
        try:
            try:
                module = builder.kubernetes_module(version)
                durations = builder.build_kubernetes(module, names, scratch)
            except AssetsError as error:
                raise KindError(f"building Kubernetes {version}'s node binaries failed: {error}") from error
            metadata = {
                "version": version,
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "go_version": go.version,
                "build_seconds": {k: round(v, 1) for k, v in durations.items()},
            }
            (scratch / NODE_METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
            scratch.chmod(0o755)
            if directory.exists():
                shutil.rmtree(directory)
            os.rename(scratch, directory)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return paths


def etcd_binary(version: str, control_plane_etcd: Path, cache: KindCache, progress: Progress) -> Path:
    """The etcd whose release is the one kubeadm expects (tag ``X.Y.Z-0``): reused or built."""
    wanted = recipe.minor_recipe(version).etcd_version
    if _installed_etcd_version(version, cache) == wanted:
        return control_plane_etcd
    destination = cache.tool("etcd", f"v{wanted}")
    if destination.is_file():
        return destination
    go = require_go(f"building etcd {wanted}")
    builder = KubernetesBuilder(go, cache.locations.gobuild_dir, progress)
    destination.parent.mkdir(parents=True, exist_ok=True)
    with holding_lock(
        destination.with_name("etcd.lock"), progress, f"another process is building etcd {wanted}"
    ):
        if destination.is_file():
            return destination
        partial = destination.with_name(f".etcd-{os.getpid()}.partial")
        try:
            builder.build_etcd(wanted, partial, f"kubeadm {recipe.minor_of(version)} expects it")
            os.replace(partial, destination)
        except AssetsError as error:
            raise KindError(f"building etcd {wanted} for the node image failed: {error}") from error
        finally:
            partial.unlink(missing_ok=True)
    return destination


def tool_binaries(version: str, cache: KindCache, progress: Progress) -> dict[str, Path]:
    """CoreDNS (lean build), crictl (go install) and pause (gcc) at the recipe's versions for ``version``."""
    parts = recipe.minor_recipe(version)
    crictl = recipe.CRICTL_VERSION
    paths: dict[str, Path] = {}
    destination = cache.tool("crictl", crictl)
    if destination.is_file():
        paths["crictl"] = destination
    else:
        paths["crictl"] = go_install(
            require_go(f"building crictl {crictl}"),
            f"{recipe.CRICTL_PACKAGE}@{crictl}",
            "crictl",
            destination,
            progress,
            f"building crictl {crictl} from Go modules, first time only",
            ldflags=f"-X {recipe.CRICTL_VERSION_VARIABLE}={crictl}",
        )
    paths["coredns"] = coredns_binary(parts.coredns, cache, progress)
    paths["pause"] = build_pause(cache.tool("pause", parts.pause), progress)
    return paths


def node_binaries(version: str, cache: KindCache, progress: Progress) -> NodeBinaries:
    """Everything, built where missing: the control plane first (shared with ``ktest binaries``),
    then the rest side by side (one build's link or download overlaps another's compile)."""
    control_plane = control_plane_binaries(version, progress)
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="ktest-node-build") as pool:
        kubernetes = pool.submit(kubernetes_node_binaries, version, cache, progress)
        etcd = pool.submit(etcd_binary, version, control_plane["etcd"], cache, progress)
        tools = pool.submit(tool_binaries, version, cache, progress)
        paths = {**control_plane, **kubernetes.result(), "etcd": etcd.result(), **tools.result()}
    return NodeBinaries(version, paths)
