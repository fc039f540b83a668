"""The operator's API traffic: recorded, and broken on purpose when a test asks.

Every operator ktest starts talks to the API server through an :class:`OperatorProxy` (unless
``proxy=False`` or ``ktest_operator_proxy = off``): ``op.traffic`` records its calls,
``op.faults.inject(rule)`` breaks some of them for a block (rules from :mod:`ktest.faults`).
Names are imported on first use, so the pytest plugin can read the default cheaply.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.proxy.faults import Faults as Faults
    from ktest.proxy.faults import Injection as Injection
    from ktest.proxy.faults import UnusedFaultRuleWarning as UnusedFaultRuleWarning
    from ktest.proxy.operator_proxy import OperatorProxy as OperatorProxy
    from ktest.proxy.rules import FaultRuleError as FaultRuleError
    from ktest.proxy.rules import Rule as Rule
    from ktest.proxy.traffic import Call as Call
    from ktest.proxy.traffic import Traffic as Traffic

_NAMES_BY_MODULE = {
    "traffic": ("Call", "Traffic"),
    "faults": ("Faults", "Injection", "UnusedFaultRuleWarning"),
    "operator_proxy": ("OperatorProxy",),
    "rules": ("FaultRuleError", "Rule"),
}
_EXPORTS = {name: f"ktest.proxy.{module}" for module, names in _NAMES_BY_MODULE.items() for name in names}

__all__ = sorted(_EXPORTS)


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
