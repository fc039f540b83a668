"""What differs between the Kubernetes minors ktest supports, as one table.

Every per-minor fact lives here, so supporting a new minor is one row: the etcd
release its kubeadm runs (``ktest binaries`` builds that etcd; a kind node image
runs it), the CoreDNS and pause images kubeadm deploys (ktest's kind node image
builds CoreDNS and ships pause under those tags), the Go version its ``go.mod``
asks for (a Go build needs at least that ``go``), and the newest patch release
checked against.

The facts come from each release's own sources, ``cmd/kubeadm/app/constants/constants.go``
(``DefaultEtcdVersion``, ``CoreDNSVersion``, ``PauseVersion``) and ``go.mod`` (``go``), read
from the Go module proxy (``go mod download -json k8s.io/kubernetes@v<patch>``).

The oldest supported minor, 1.32, is the oldest the major managed Kubernetes services (EKS, GKE,
AKS) still ran when it was added; the newest is the newest release the Go module proxy serves.
"""

from __future__ import annotations

from dataclasses import dataclass

from ktest.errors import AssetsError


@dataclass(frozen=True)
class MinorFacts:
    """The facts of one Kubernetes minor ktest needs to obtain and run it."""

    minor: str
    # The etcd server release this minor's kubeadm runs (its image tag without the ``-0``).
    etcd: str
    # CoreDNS and pause image tags kubeadm of this minor deploys.
    coredns: str
    pause: str
    # The ``go`` directive of this minor's go.mod: the oldest Go toolchain that builds it.
    go: str
    # The newest patch release these facts were checked against.
    checked_patch: str

    @property
    def minor_number(self) -> int:
        """``32`` for ``1.32``."""
        return int(self.minor.split(".")[1])


def _facts(*rows: MinorFacts) -> dict[str, MinorFacts]:
    return {row.minor: row for row in rows}


MINORS: dict[str, MinorFacts] = _facts(
    MinorFacts("1.32", etcd="3.5.24", coredns="v1.11.3", pause="3.10", go="1.23.0", checked_patch="1.32.13"),
    MinorFacts("1.33", etcd="3.5.24", coredns="v1.12.0", pause="3.10", go="1.24.0", checked_patch="1.33.13"),
    MinorFacts("1.34", etcd="3.6.5", coredns="v1.12.1", pause="3.10.1", go="1.24.0", checked_patch="1.34.4"),
    MinorFacts("1.35", etcd="3.6.6", coredns="v1.13.1", pause="3.10.1", go="1.25.0", checked_patch="1.35.4"),
    MinorFacts("1.36", etcd="3.6.8", coredns="v1.14.2", pause="3.10.2", go="1.26.0", checked_patch="1.36.3"),
    MinorFacts("1.37", etcd="3.7.0", coredns="v1.14.6", pause="3.10.2", go="1.26.0", checked_patch="1.37.2"),
)
DEFAULT_MINOR = "1.37"
# The minor the suite tests beside the default (``make test``'s OLDER_K8S_VERSION): the previous one,
# so an upgrade test moves from it to the default without building anything else.
OLDER_MINOR = "1.36"


def supported_minors() -> list[str]:
    """The supported minors, newest first."""
    return sorted(MINORS, key=lambda minor: MINORS[minor].minor_number, reverse=True)


def facts(minor: str) -> MinorFacts:
    """The facts of ``minor`` (``"1.34"``); AssetsError naming the supported minors otherwise."""
    try:
        return MINORS[minor]
    except KeyError:
        raise AssetsError(
            f"Kubernetes {minor} is not supported by ktest: supported minors are "
            f"{', '.join(supported_minors())}.\nPick one of those (e.g. --k8s-version {DEFAULT_MINOR})."
        ) from None
