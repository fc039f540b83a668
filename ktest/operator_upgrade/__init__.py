"""An add-on: the operator's own upgrade. Version A converges and stops, version B starts over the
same cluster; what B changed on the objects A left is the diff, judged by
``assert_no_rollout`` (no managed Pod template changed) and ``assert_quiet`` (no write beyond what
the upgrade needs). The core never imports it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.operator_upgrade.diff import ObjectChange as ObjectChange
    from ktest.operator_upgrade.snapshot import ObjectKey as ObjectKey
    from ktest.operator_upgrade.upgrade import OperatorUpgrade as OperatorUpgrade
    from ktest.operator_upgrade.upgrade import operator_upgrade as operator_upgrade
    from ktest.operator_upgrade.versions import OperatorVersion as OperatorVersion
    from ktest.operator_upgrade.versions import callable_version as callable_version
    from ktest.operator_upgrade.versions import command_version as command_version
    from ktest.operator_upgrade.versions import kopf_version as kopf_version

_NAMES_BY_MODULE = {
    "diff": ("ObjectChange",),
    "snapshot": ("ObjectKey",),
    "upgrade": ("OperatorUpgrade", "operator_upgrade"),
    "versions": ("OperatorVersion", "callable_version", "command_version", "kopf_version"),
}
_EXPORTS = {
    name: f"ktest.operator_upgrade.{module}" for module, names in _NAMES_BY_MODULE.items() for name in names
}

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
