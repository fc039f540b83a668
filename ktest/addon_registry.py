"""The add-ons the core reaches by name only, so that it never imports them.

An add-on (simulated nodes, operator replicas, webhooks, the failure timeline, ...) is a package of
the add-on wing (docs/architecture.md), above the core; where the core offers a door to it (a
``ControlPlane`` keyword or method, a ``Cluster`` attribute, a ``ktest`` subcommand, the pytest
plugin's hooks), the door loads the add-on's part from here when first used, as
:mod:`ktest.backend_registry` does for backends.
"""

from __future__ import annotations

import importlib
from typing import Any

PARTS = {
    "plane.nodes": "ktest.nodes.simulator:SimulatedNodes",
    "plane.upgrade": "ktest.plane_upgrade.upgrade:upgrade_plane",
    "cluster.nodes": "ktest.nodes.pool:NodePool",
    "operators.replicas": "ktest.replicas.replica_set:start_replicas",
    "cli.rbac": "ktest.rbac_audit.cli:register",
    "cli.node_tools": "ktest.nodes.assets:node_tools",
}
"""Door -> ``"module:attribute"`` of the add-on part behind it."""

PYTEST_PLUGINS = {
    "ktest-webhook-fixtures": "ktest.webhooks.fixtures",
    "ktest-upgrade-fixtures": "ktest.plane_upgrade.fixtures",
    "ktest-node-fixtures": "ktest.nodes.fixtures",
    "ktest-rbac": "ktest.rbac_audit.pytest_plugin",
    "ktest-timeline": "ktest.timeline.pytest_plugin",
}
"""The add-ons' pytest plugins, by the name the plugin manager knows them: a module that defines
fixtures and hooks, registered as it is; one that defines ``register(config)`` registers itself
(the RBAC audit only when ``ktest_rbac`` is set, the timeline with its state)."""


def load(door: str) -> Any:
    """The add-on part behind ``door`` (``KeyError`` for a door no add-on serves)."""
    module, _, attribute = PARTS[door].partition(":")
    return getattr(importlib.import_module(module), attribute)


def register_pytest_plugins(config: Any) -> None:
    """Register every add-on's pytest plugin with ``config`` (a ``pytest.Config``)."""
    for name, module_name in PYTEST_PLUGINS.items():
        module = importlib.import_module(module_name)
        register = getattr(module, "register", None)
        if register is None:
            config.pluginmanager.register(module, name)
        else:
            register(config, name)
