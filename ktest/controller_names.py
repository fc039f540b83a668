"""The controllers kube-controller-manager knows, so that a bad ``ktest_controllers``
value is rejected before anything starts.

Taken from kube-controller-manager's ``--controllers`` list (its ``names`` package)
for Kubernetes 1.32 to 1.37; a name only some of those minors know is marked.
ktest also accepts the short form of each name (``garbagecollector`` for
``garbage-collector-controller``); the control plane maps both to the binary's
own names when it starts.
"""

from __future__ import annotations

from collections.abc import Iterable

KNOWN_CONTROLLERS: tuple[str, ...] = (
    "bootstrap-signer-controller",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller",
    "certificatesigningrequest-signing-controller",
    "cloud-node-lifecycle-controller",  # up to 1.36
    "clusterrole-aggregation-controller",
    "cronjob-controller",
    "daemonset-controller",
    "deployment-controller",
    "device-taint-eviction-controller",  # 1.33 on
    "disruption-controller",
    "endpoints-controller",
    "endpointslice-controller",
    "endpointslice-mirroring-controller",
    "ephemeral-volume-controller",
    "garbage-collector-controller",
    "horizontal-pod-autoscaler-controller",
    "job-controller",
    "kube-apiserver-serving-clustertrustbundle-publisher-controller",
    "legacy-serviceaccount-token-cleaner-controller",
    "namespace-controller",
    "node-ipam-controller",
    "node-lifecycle-controller",
    "node-route-controller",  # up to 1.36
    "persistentvolume-attach-detach-controller",
    "persistentvolume-binder-controller",
    "persistentvolume-expander-controller",
    "persistentvolume-protection-controller",
    "persistentvolumeclaim-protection-controller",
    "pod-garbage-collector-controller",
    "podcertificaterequest-cleaner-controller",  # 1.34 on
    "podgroup-protection-controller",  # 1.36 on
    "replicaset-controller",
    "replicationcontroller-controller",
    "resourceclaim-controller",
    "resourcepoolstatusrequest-controller",  # 1.36 on
    "resourcequota-controller",
    "root-ca-certificate-publisher-controller",
    "selinux-warning-controller",
    "service-cidr-controller",
    "service-lb-controller",  # up to 1.36
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "statefulset-controller",
    "storage-version-migrator-controller",
    "storageversion-garbage-collector-controller",
    "taint-eviction-controller",
    "token-cleaner-controller",
    "ttl-after-finished-controller",
    "ttl-controller",
    "validatingadmissionpolicy-status-controller",
    "volumeattributesclass-protection-controller",
)


def short_name(name: str) -> str:
    """``garbage-collector-controller`` and ``garbagecollector`` -> ``garbagecollector``."""
    key = name.lower().replace("-", "").replace("_", "")
    return key.removesuffix("controller") or key


_BY_SHORT_NAME = {short_name(name): name for name in KNOWN_CONTROLLERS}


def known_controller(name: str) -> str | None:
    """The full name of controller ``name`` (full or short form), or None if unknown."""
    if name in KNOWN_CONTROLLERS:
        return name
    return _BY_SHORT_NAME.get(short_name(name))


def runs_controller(controllers: Iterable[str], wanted: str) -> bool:
    """Whether ``controllers`` (full names or short forms, as the user gave them) include
    ``wanted`` (either form): ``garbage-collector-controller`` counts as ``garbagecollector``."""
    key = short_name(wanted)
    return any(short_name(name) == key for name in controllers)
