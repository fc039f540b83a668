"""Ready assertions for what operators get wrong: finalizers, owner references and
garbage collection, the status subresource and conditions, conflicts, hot loops, webhooks.

Each takes a ``Cluster`` and objects as dicts, ``ObjectRef`` or
``(apiVersion, kind, name[, namespace])`` tuples; timeouts and windows default to
``ktest.wait``'s settings. A failure is an ``AssertionError`` that names the
object (kind, namespace/name, apiVersion, uid), the Kubernetes rule broken and
what was observed. ``ktest.assertions.aio`` has the same names for async tests.
"""

from __future__ import annotations

from ktest.lazy import lazy_attributes
from ktest.public_api import ASSERTION_HELPERS, ASSERTIONS

_EXPORTS = {
    **{name: f"ktest.assertions.{module}" for name, (module, _) in ASSERTIONS.items()},
    **{name: f"ktest.assertions.{module}" for name, module in ASSERTION_HELPERS.items()},
}

__all__ = sorted([*_EXPORTS, "aio"])

__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals(), submodules=["aio"])
