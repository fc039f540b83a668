"""The add-ons the core reaches by name only, so that it never imports them.

An add-on (simulated nodes, operator replicas, ...) sits above the core; where the core offers a door to it (a
``ControlPlane`` keyword, a ``Cluster`` attribute), the door loads the add-on's part from here
when first used, as :mod:`ktest.backend_registry` does for backends.
"""

from __future__ import annotations

import importlib
from typing import Any

PARTS = {
    "plane.nodes": "ktest.nodes.simulator:SimulatedNodes",
    "cluster.nodes": "ktest.nodes.pool:NodePool",
    "operators.replicas": "ktest.replicas.replica_set:start_replicas",
}
"""Door -> ``"module:attribute"`` of the add-on part behind it."""


def load(door: str) -> Any:
    """The add-on part behind ``door`` (``KeyError`` for a door no add-on serves)."""
    module, _, attribute = PARTS[door].partition(":")
    return getattr(importlib.import_module(module), attribute)
