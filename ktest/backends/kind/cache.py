"""Where the kind layer keeps what it builds: under ktest's cache root, next to ``k8s/``.

``<cache>/kind/bin/<kind version>/kind``            the kind binary
``<cache>/kind/tools/<name>-<version>/<name>``      CoreDNS, crictl, pause
``<cache>/kind/k8s/<version>-linux-<arch>/``        kubelet, kubeadm, kube-scheduler, kube-proxy
``<cache>/kind/rootfs/<key>/rootfs.tar``            the node's Debian root filesystem
``<cache>/kind/build.lock``                         one image build at a time per machine
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ktest.assets.store import Locations


@dataclass(frozen=True)
class KindCache:
    """The kind layer's directories, derived from ktest's cache :class:`Locations`."""

    locations: Locations

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> KindCache:
        return cls(Locations.from_env(env))

    @property
    def root(self) -> Path:
        return self.locations.cache_root / "kind"

    def kind_binary(self, kind_version: str) -> Path:
        return self.root / "bin" / kind_version / "kind"

    def tool(self, name: str, version: str) -> Path:
        return self.root / "tools" / f"{name}-{version}" / name

    def node_binaries(self, k8s_version: str) -> Path:
        return self.root / "k8s" / self.locations.entry_name(k8s_version)

    def rootfs(self, key: str) -> Path:
        return self.root / "rootfs" / key / "rootfs.tar"

    @property
    def build_lock(self) -> Path:
        return self.root / "build.lock"

    @property
    def scratch(self) -> Path:
        return self.root / "scratch"
