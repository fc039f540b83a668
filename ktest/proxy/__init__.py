"""The operator's API traffic: recorded, and broken on purpose when a test asks.

Every operator ktest starts talks to the API server through an
:class:`OperatorProxy` (unless ``proxy=False`` or the setting
``ktest_operator_proxy = off``): ``op.traffic`` is the record of its calls,
``op.faults.inject(rule)`` breaks
some of them for a block. Rules are made with :mod:`ktest.faults`.

Modules: ``requests`` (naming a request), ``traffic`` (the record), ``rules``
and ``faults`` (what to break), ``server`` (forwarding), ``proxy`` (one
operator identity behind a proxy), ``defaults`` (on by default). Names are
imported on first use, so the pytest plugin can read the default cheaply.
"""

from __future__ import annotations

from ktest.lazy import lazy_attributes

_EXPORTS = {
    "Call": "ktest.proxy.traffic",
    "Traffic": "ktest.proxy.traffic",
    "Faults": "ktest.proxy.faults",
    "Injection": "ktest.proxy.faults",
    "UnusedFaultRuleWarning": "ktest.proxy.faults",
    "OperatorProxy": "ktest.proxy.operator_proxy",
    "FaultRuleError": "ktest.proxy.rules",
    "Rule": "ktest.proxy.rules",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
