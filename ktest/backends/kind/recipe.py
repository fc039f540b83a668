"""The facts a ktest kind node image is built from, as data (one place to update).

Checked against kind v0.33.0; the per-minor versions (CoreDNS, pause, etcd) come from
ktest/assets/minors.py, read from each minor's kubeadm sources. A build re-checks the component
image names against what the freshly built ``kubeadm config images list``
prints, so a stale entry here fails loudly instead of producing a node that
tries to pull.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ktest.assets import minors as minor_facts
from ktest.assets.selectors import KubeVersion
from ktest.errors import KindError

KIND_MODULE = "sigs.k8s.io/kind"
KIND_VERSION = "v0.33.0"
# Bump when the build steps change what ends up in an image: older images are then rebuilt.
RECIPE_VERSION = "3"  # 2: lean CoreDNS (ktest/kind/image/coredns.py); 3: one crictl, etcd as ktest binaries

NODE_IMAGE_REPOSITORY = "ktest/kind-node"
# Intermediate images (the Debian root filesystem, the node base) live under this repository.
PARTS_REPOSITORY = "ktest/kind-parts"
IMAGE_REGISTRY = "registry.k8s.io"

LABEL_PREFIX = "io.ktest.kind."
LABEL_KUBERNETES_VERSION = LABEL_PREFIX + "kubernetes-version"
LABEL_KIND_VERSION = LABEL_PREFIX + "kind-version"
LABEL_RECIPE_VERSION = LABEL_PREFIX + "recipe-version"
LABEL_BUILD_DATE = LABEL_PREFIX + "build-date"
# On every container a build starts (value BUILD_RUNNING), so leftovers of an interrupted build are
# found and removed. A commit copies the container's labels into the image, and so into every kind
# node made from it: the commit overrides the value with BUILD_COMMITTED, which the sweep ignores.
LABEL_BUILD_CONTAINER = LABEL_PREFIX + "build-container"
BUILD_RUNNING = "running"
BUILD_COMMITTED = "committed"
BUILD_CONTAINER_PREFIX = "ktest-kind-build-"

COREDNS_MODULE = "github.com/coredns/coredns"
CRICTL_PACKAGE = "sigs.k8s.io/cri-tools/cmd/crictl"
# crictl reports "unknown" unless its release stamps this variable.
CRICTL_VERSION_VARIABLE = "sigs.k8s.io/cri-tools/pkg/version.Version"

# Commands of k8s.io/kubernetes a node needs. kube-apiserver, kube-controller-manager and kubectl
# come from ktest's binary cache (`ktest binaries`); the others are built for the node only.
NODE_COMMANDS = ("kubelet", "kubeadm", "kube-scheduler", "kube-proxy")
# Control-plane components run as static pods from these images (kubeadm's names).
COMPONENT_IMAGES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy")


@dataclass(frozen=True)
class MinorRecipe:
    """Versions kubeadm of one minor expects: CoreDNS, pause and the etcd release (its image tag
    is ``<etcd_version>-0``; the same table tells ``ktest binaries`` which etcd to build)."""

    coredns: str
    pause: str
    etcd_version: str

    @property
    def etcd_tag(self) -> str:
        """``3.7.0-0`` for etcd 3.7.0 (kubeadm's image tag)."""
        return f"{self.etcd_version}-0"


# Per-minor versions come from ktest/assets/minors.py, the one table of what differs per minor.
MINORS: dict[str, MinorRecipe] = {
    minor: MinorRecipe(coredns=facts.coredns, pause=facts.pause, etcd_version=facts.etcd)
    for minor, facts in minor_facts.MINORS.items()
}
# One crictl for every minor: it speaks CRI v1, which every supported kubelet and containerd serve,
# so the node images share one build (the newest release the Go module proxy serves).
CRICTL_VERSION = "v1.37.0"
DEFAULT_MINOR = minor_facts.DEFAULT_MINOR

DEBIAN_SUITE = "bookworm"
# The node's userland: systemd as init, containerd + runc + CNI plugins from Debian, and the tools
# kind's entrypoint and kubeadm call.
DEBOOTSTRAP_PACKAGES = (
    "systemd", "dbus", "conntrack", "iptables", "nftables", "iproute2", "ethtool", "util-linux",
    "mount", "kmod", "libseccomp2", "pigz", "e2fsprogs", "bash", "ca-certificates", "curl", "jq",
    "procps", "containerd", "runc", "containernetworking-plugins", "socat", "ebtables", "ipset",
)

POD_SUBNET = "10.244.0.0/16"
# The kubelet refuses cgroup v1 from 1.35 on unless ``failCgroupV1: false``; the field exists since 1.31.
FIRST_MINOR_WITH_FAIL_CGROUP_V1 = 31


def minor_of(k8s_version: str) -> str:
    """``1.37`` for ``1.37.2`` or ``v1.37.2``."""
    return KubeVersion.parse(k8s_version).minor_text


def minor_recipe(k8s_version: str) -> MinorRecipe:
    """The recipe for ``k8s_version``'s minor; KindError when that minor is not supported."""
    minor = minor_of(k8s_version)
    try:
        return MINORS[minor]
    except KeyError:
        raise KindError(
            f"Kubernetes {k8s_version} is not supported by ktest's kind node images: ktest knows "
            f"the component versions of {', '.join(MINORS)} only (kind {KIND_VERSION}).\n"
            f"Pick one of those with --k8s-version (e.g. {DEFAULT_MINOR})."
        ) from None


def expected_images(k8s_version: str) -> list[str]:
    """What ``kubeadm config images list --kubernetes-version v<k8s_version>`` prints."""
    version = KubeVersion.parse(k8s_version).tag
    parts = minor_recipe(version)
    return [
        *(f"{IMAGE_REGISTRY}/{name}:{version}" for name in COMPONENT_IMAGES),
        f"{IMAGE_REGISTRY}/coredns/coredns:{parts.coredns}",
        f"{IMAGE_REGISTRY}/pause:{parts.pause}",
        f"{IMAGE_REGISTRY}/etcd:{parts.etcd_tag}",
    ]


def required_cluster_config(
    k8s_version: str | None = None,
    *,
    ktest_image: bool = True,
    cgroup_version: int | None = None,
    workers: int = 0,
) -> dict[str, Any]:
    """The kind ``Cluster`` config a node image needs on this engine; merge user settings into it.

    - ``disableDefaultCNI`` + ``podSubnet`` (ktest images only): kind's kindnetd image cannot be
      had offline; ktest's node image ships its own bridge CNI, which assumes 10.244.0.0/16.
    - ``failCgroupV1: false`` on cgroup v1 engines: the kubelet refuses cgroup v1 from 1.35 on
      unless told not to (the field exists since 1.31, so older versions get no patch).

    ``cgroup_version`` None asks the Docker engine; ``k8s_version`` None assumes a recent release.
    """
    if cgroup_version is None:
        from ktest.backends.kind.engine import cgroup_version as engine_cgroup_version
        from ktest.backends.kind.engine import connect

        cgroup_version = engine_cgroup_version(connect(check_runtime=False))
    config: dict[str, Any] = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4"}
    if ktest_image:
        config["networking"] = {"disableDefaultCNI": True, "podSubnet": POD_SUBNET}
    config["nodes"] = [{"role": "control-plane"}] + [{"role": "worker"} for _ in range(workers)]
    minor = KubeVersion.parse(k8s_version).minor if k8s_version else None
    if cgroup_version == 1 and (minor is None or minor >= FIRST_MINOR_WITH_FAIL_CGROUP_V1):
        config["kubeadmConfigPatches"] = ["kind: KubeletConfiguration\nfailCgroupV1: false\n"]
    return config
