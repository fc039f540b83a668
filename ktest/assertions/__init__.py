"""Ready assertions for what operators get wrong: finalizers, owner references and
garbage collection, the status subresource and conditions, conflicts, hot loops, webhooks.

Each takes a ``Cluster`` and objects as dicts, ``ObjectRef`` or
``(apiVersion, kind, name[, namespace])`` tuples; timeouts and windows default to
``ktest.wait``'s settings. A failure is an ``AssertionError`` that names the
object (kind, namespace/name, apiVersion, uid), the Kubernetes rule broken and
what was observed. ``ktest.assertions.aio`` has the same names for async tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes
from ktest.public_api import ASSERTION_HELPERS, ASSERTIONS, assertion_module

if TYPE_CHECKING:
    from ktest.assertions import aio as aio
    from ktest.assertions.conditions import TransitionHistory as TransitionHistory
    from ktest.assertions.conditions import assert_condition as assert_condition
    from ktest.assertions.conditions import assert_transition_time_stable as assert_transition_time_stable
    from ktest.assertions.conditions import condition_shape_problems as condition_shape_problems
    from ktest.assertions.conflict_injection import ConflictInjector as ConflictInjector
    from ktest.assertions.conflicts import ConcurrentWriter as ConcurrentWriter
    from ktest.assertions.conflicts import ConflictNotMetWarning as ConflictNotMetWarning
    from ktest.assertions.conflicts import assert_conflict_on_stale_update as assert_conflict_on_stale_update
    from ktest.assertions.conflicts import (
        assert_survives_concurrent_writes as assert_survives_concurrent_writes,
    )
    from ktest.assertions.conflicts import stale_copy as stale_copy
    from ktest.assertions.finalizers import FinalizerScenario as FinalizerScenario
    from ktest.assertions.finalizers import assert_deletion_blocked as assert_deletion_blocked
    from ktest.assertions.finalizers import assert_gone as assert_gone
    from ktest.assertions.finalizers import assert_has_finalizer as assert_has_finalizer
    from ktest.assertions.finalizers import finalizer_scenario as finalizer_scenario
    from ktest.assertions.ownership import assert_garbage_collected as assert_garbage_collected
    from ktest.assertions.ownership import assert_orphaned as assert_orphaned
    from ktest.assertions.ownership import assert_owned_by as assert_owned_by
    from ktest.assertions.ownership import owner_reference_problems as owner_reference_problems
    from ktest.assertions.quiescence import Quiescence as Quiescence
    from ktest.assertions.quiescence import assert_quiescent as assert_quiescent
    from ktest.assertions.status import StatusSubresourceReport as StatusSubresourceReport
    from ktest.assertions.status import assert_observed_generation as assert_observed_generation
    from ktest.assertions.status import assert_status_subresource as assert_status_subresource
    from ktest.assertions.traffic import assert_backs_off as assert_backs_off
    from ktest.assertions.traffic import assert_no_hot_loop as assert_no_hot_loop
    from ktest.assertions.traffic import assert_recovers as assert_recovers
    from ktest.assertions.traffic import assert_relists_after_410 as assert_relists_after_410
    from ktest.crd_versions.assertions import assert_round_trips as assert_round_trips
    from ktest.crd_versions.assertions import assert_stored_as as assert_stored_as
    from ktest.plane_upgrade.assertions import ObjectSnapshot as ObjectSnapshot
    from ktest.plane_upgrade.assertions import UpgradeRecovery as UpgradeRecovery
    from ktest.plane_upgrade.assertions import assert_no_removed_api_calls as assert_no_removed_api_calls
    from ktest.plane_upgrade.assertions import assert_objects_intact as assert_objects_intact
    from ktest.plane_upgrade.assertions import (
        assert_recovered_after_upgrade as assert_recovered_after_upgrade,
    )
    from ktest.plane_upgrade.assertions import snapshot_objects as snapshot_objects
    from ktest.webhooks.assertions import assert_converts as assert_converts
    from ktest.webhooks.assertions import assert_defaulted as assert_defaulted
    from ktest.webhooks.assertions import assert_rejected as assert_rejected

_EXPORTS = {
    **{name: assertion_module(module) for name, (module, _) in ASSERTIONS.items()},
    **{name: assertion_module(module) for name, module in ASSERTION_HELPERS.items()},
}

__all__ = sorted([*_EXPORTS, "aio"])

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals(), submodules=["aio"])
