"""Where a kind cluster's nodes reach this machine: the gateway of their Docker network.

A kind node is a container on a Docker bridge network (``kind`` by default); the
host owns that bridge's gateway address, so a server listening there (a webhook
server for the API server inside the node) is reachable from the node.
"""

from __future__ import annotations

from typing import Any

from ktest.errors import KindError


def host_gateway(cluster_name: str) -> str:
    """The IPv4 gateway of the Docker network of kind cluster ``cluster_name``'s nodes."""
    from ktest.backends.kind.cluster import node_containers

    containers = node_containers(cluster_name)
    if not containers:
        raise KindError(f"kind cluster {cluster_name} has no node containers: is it still running?")
    networks: dict[str, Any] = containers[0].attrs.get("NetworkSettings", {}).get("Networks") or {}
    for name in sorted(networks, key=lambda n: n != "kind"):  # kind's own network first
        gateway = (networks[name] or {}).get("Gateway")
        if gateway:
            return str(gateway)
    raise KindError(
        f"node {containers[0].name} of kind cluster {cluster_name} is on no Docker network with an "
        f"IPv4 gateway (networks: {', '.join(networks) or 'none'}): the API server cannot reach this machine"
    )
