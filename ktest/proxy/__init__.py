"""The operator's API traffic: recorded, and broken on purpose when a test asks.

Every operator ktest starts talks to the API server through an
:class:`OperatorProxy` (unless ``proxy=False`` or the setting
``ktest_operator_proxy = off``): ``op.traffic`` is the record of its calls,
``op.faults.inject(rule)`` (or ``cluster.faults(op).inject(rule)``) breaks
some of them for a block. Rules are made with :mod:`ktest.faults`.

Modules: ``requests`` (naming a request), ``traffic`` (the record), ``rules``
and ``faults`` (what to break), ``server`` (forwarding), ``proxy`` (one
operator identity behind a proxy), ``defaults`` (on by default). Names are
imported on first use, so the pytest plugin can read the default cheaply.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Call": "ktest.proxy.traffic",
    "Traffic": "ktest.proxy.traffic",
    "Faults": "ktest.proxy.faults",
    "Injection": "ktest.proxy.faults",
    "UnusedFaultRuleWarning": "ktest.proxy.faults",
    "OperatorProxy": "ktest.proxy.proxy",
    "FaultRuleError": "ktest.proxy.rules",
    "Rule": "ktest.proxy.rules",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ktest.proxy' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
