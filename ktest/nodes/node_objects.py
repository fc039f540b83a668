"""Node objects for simulated nodes: names, addresses, Pod CIDRs, capacity, labels and taints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ktest.errors import ControlPlaneError

NODE_NAME_PREFIX = "ktest-node-"
DEFAULT_CAPACITY = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
SIMULATED_ANNOTATION = "kwok.x-k8s.io/node"
"""KWOK's mark of a node it simulates (value ``fake``)."""
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def node_object(
    name: str,
    index: int,
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str] | str] = (),
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node KWOK will manage: ``index`` picks its address (172.30.x.y) and Pod CIDR (10.244.x.0/24)."""
    if not 1 <= index <= 65_000:
        raise ControlPlaneError(f"simulated node index {index} out of range (1..65000)")
    resources = {**DEFAULT_CAPACITY, **dict(capacity or {})}
    address = f"172.30.{index // 250}.{index % 250 + 1}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **dict(labels or {}),
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", SIMULATED_ANNOTATION: "fake"},
        },
        "spec": {
            "podCIDR": f"10.244.{index % 256}.0/24",
            "podCIDRs": [f"10.244.{index % 256}.0/24"],
            "taints": [parse_taint(taint) for taint in taints],
        },
        "status": {
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
            "capacity": resources,
            "allocatable": resources,
        },
    }


def parse_taint(taint: Mapping[str, str] | str) -> dict[str, str]:
    """``"key=value:Effect"``, ``"key:Effect"`` or a mapping -> a taint; ControlPlaneError if malformed."""
    if isinstance(taint, Mapping):
        found = {k: str(v) for k, v in taint.items()}
    else:
        text = str(taint)
        key_value, _, effect = text.rpartition(":")
        key, _, value = key_value.partition("=")
        found = {"key": key, "effect": effect, **({"value": value} if value else {})}
    if not found.get("key") or found.get("effect") not in _EFFECTS:
        raise ControlPlaneError(
            f"taint {taint!r} is not of the form key=value:Effect or key:Effect with Effect one of "
            f"{', '.join(_EFFECTS)} (e.g. 'dedicated=gpu:NoSchedule')."
        )
    return found


def node_problem(node: Mapping[str, Any] | None) -> str:
    """Why ``node`` cannot take Pods yet ("" when it can): not Ready, or still tainted not-ready."""
    if node is None:
        return "missing"
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    if conditions.get("Ready") != "True":
        return f"Ready is {conditions.get('Ready', 'not reported')}"
    taints = [t.get("key") for t in (node.get("spec") or {}).get("taints") or []]
    if NOT_READY_TAINT in taints:
        return f"still tainted {NOT_READY_TAINT}"
    return ""
