"""Fault rules for ``op.faults.inject(...)``: close watches, 410 Gone, 409, 429, 5xx, latency, reset.

    from ktest import faults

    with op.faults.inject(faults.conflict("webapps", times=5), faults.latency(0.2, verb="list")):
        ...

See :mod:`ktest.proxy.rules` for what each rule does.
"""

from __future__ import annotations

from ktest.proxy.faults import UnusedFaultRuleWarning
from ktest.proxy.rules import (
    FaultRuleError,
    Rule,
    close_watches,
    conflict,
    gone,
    latency,
    reset,
    server_error,
    throttle,
)

__all__ = [
    "FaultRuleError",
    "Rule",
    "UnusedFaultRuleWarning",
    "close_watches",
    "conflict",
    "gone",
    "latency",
    "reset",
    "server_error",
    "throttle",
]
