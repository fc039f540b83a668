"""ktest: envtest-style integration testing of Kubernetes operators.

The public names are imported lazily, so ``import ktest`` is cheap and has no
side effects (the pytest plugin imports it in every test run). Type checkers and
IDEs read the ``TYPE_CHECKING`` imports below instead, which give every name its
real type; ``tests/test_public_api.py`` keeps them equal to ``ktest.public_api``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes
from ktest.public_api import TOP_LEVEL, VERSION

if TYPE_CHECKING:
    from ktest.assertions import ConcurrentWriter as ConcurrentWriter
    from ktest.assertions import assert_backs_off as assert_backs_off
    from ktest.assertions import assert_condition as assert_condition
    from ktest.assertions import assert_conflict_on_stale_update as assert_conflict_on_stale_update
    from ktest.assertions import assert_converts as assert_converts
    from ktest.assertions import assert_defaulted as assert_defaulted
    from ktest.assertions import assert_deletion_blocked as assert_deletion_blocked
    from ktest.assertions import assert_garbage_collected as assert_garbage_collected
    from ktest.assertions import assert_gone as assert_gone
    from ktest.assertions import assert_has_finalizer as assert_has_finalizer
    from ktest.assertions import assert_no_hot_loop as assert_no_hot_loop
    from ktest.assertions import assert_no_removed_api_calls as assert_no_removed_api_calls
    from ktest.assertions import assert_objects_intact as assert_objects_intact
    from ktest.assertions import assert_observed_generation as assert_observed_generation
    from ktest.assertions import assert_orphaned as assert_orphaned
    from ktest.assertions import assert_owned_by as assert_owned_by
    from ktest.assertions import assert_quiescent as assert_quiescent
    from ktest.assertions import assert_recovered_after_upgrade as assert_recovered_after_upgrade
    from ktest.assertions import assert_recovers as assert_recovers
    from ktest.assertions import assert_rejected as assert_rejected
    from ktest.assertions import assert_relists_after_410 as assert_relists_after_410
    from ktest.assertions import assert_round_trips as assert_round_trips
    from ktest.assertions import assert_status_subresource as assert_status_subresource
    from ktest.assertions import assert_stored_as as assert_stored_as
    from ktest.assertions import assert_survives_concurrent_writes as assert_survives_concurrent_writes
    from ktest.assertions import assert_transition_time_stable as assert_transition_time_stable
    from ktest.assertions import finalizer_scenario as finalizer_scenario
    from ktest.assertions import stale_copy as stale_copy
    from ktest.assets import Assets as Assets
    from ktest.assets import resolve_assets as resolve_assets
    from ktest.backends.kind.binary_image import image_from_binary as image_from_binary
    from ktest.backends.kind.handle import KindHandle as KindHandle
    from ktest.cluster import Cluster as Cluster
    from ktest.cluster import ObjectRef as ObjectRef
    from ktest.cluster import load_manifests as load_manifests
    from ktest.controlplane import ControlPlane as ControlPlane
    from ktest.errors import AssetsError as AssetsError
    from ktest.errors import ClusterError as ClusterError
    from ktest.errors import ConfigError as ConfigError
    from ktest.errors import ControlPlaneError as ControlPlaneError
    from ktest.errors import CRDError as CRDError
    from ktest.errors import KindError as KindError
    from ktest.errors import KtestError as KtestError
    from ktest.errors import ManifestError as ManifestError
    from ktest.errors import OperatorError as OperatorError
    from ktest.errors import WebhookError as WebhookError
    from ktest.errors.api import ApiError as ApiError
    from ktest.replicas import assert_failover as assert_failover
    from ktest.replicas import assert_single_writer as assert_single_writer
    from ktest.wait import assert_matches as assert_matches
    from ktest.wait import consistently as consistently
    from ktest.wait import eventually as eventually
    from ktest.webhooks import Webhooks as Webhooks

__version__ = VERSION

_EXPORTS = TOP_LEVEL  # the public API is listed once, in ktest.public_api

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt name is an error, not Any
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
