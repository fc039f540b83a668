"""Ready assertions for what operators get wrong: finalizers, owner references and
garbage collection, the status subresource and conditions, conflicts, hot loops, webhooks.

Each takes a ``Cluster`` and objects as dicts, ``ObjectRef`` or
``(apiVersion, kind, name[, namespace])`` tuples; timeouts and windows default to
``ktest.wait``'s settings. A failure is an ``AssertionError`` that names the
object (kind, namespace/name, apiVersion, uid), the Kubernetes rule broken and
what was observed. ``ktest.assertions.aio`` has the same names for async tests.
"""

from __future__ import annotations

from ktest.assertions import aio
from ktest.assertions.conflict_injection import ConflictInjector
from ktest.assertions.conflicts import (
    ConcurrentWriter,
    ConflictNotMetWarning,
    assert_conflict_on_stale_update,
    assert_survives_concurrent_writes,
    stale_copy,
)
from ktest.assertions.finalizers import (
    FinalizerScenario,
    assert_deletion_blocked,
    assert_gone,
    assert_has_finalizer,
    finalizer_scenario,
)
from ktest.assertions.ownership import (
    assert_garbage_collected,
    assert_orphaned,
    assert_owned_by,
    owner_reference_problems,
)
from ktest.assertions.quiescence import Quiescence, assert_quiescent
from ktest.assertions.status import (
    StatusSubresourceReport,
    TransitionHistory,
    assert_condition,
    assert_observed_generation,
    assert_status_subresource,
    assert_transition_time_stable,
    condition_shape_problems,
)
from ktest.assertions.traffic import (
    assert_backs_off,
    assert_no_hot_loop,
    assert_recovers,
    assert_relists_after_410,
)
from ktest.assertions.webhooks import assert_converts, assert_defaulted, assert_rejected

__all__ = [
    "ConcurrentWriter",
    "ConflictInjector",
    "ConflictNotMetWarning",
    "FinalizerScenario",
    "Quiescence",
    "StatusSubresourceReport",
    "TransitionHistory",
    "aio",
    "assert_backs_off",
    "assert_condition",
    "assert_conflict_on_stale_update",
    "assert_converts",
    "assert_defaulted",
    "assert_deletion_blocked",
    "assert_garbage_collected",
    "assert_gone",
    "assert_has_finalizer",
    "assert_no_hot_loop",
    "assert_observed_generation",
    "assert_orphaned",
    "assert_owned_by",
    "assert_quiescent",
    "assert_recovers",
    "assert_rejected",
    "assert_relists_after_410",
    "assert_status_subresource",
    "assert_survives_concurrent_writes",
    "assert_transition_time_stable",
    "condition_shape_problems",
    "finalizer_scenario",
    "owner_reference_problems",
    "stale_copy",
]
