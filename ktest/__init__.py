"""ktest: envtest-style integration testing of Kubernetes operators.

The public names are imported lazily, so ``import ktest`` is cheap and has no
side effects (the pytest plugin imports it in every test run).
"""

from __future__ import annotations

from ktest.lazy import lazy_attributes

__version__ = "0.1.0"

_EXPORTS = {
    "ControlPlane": "ktest.controlplane",
    "Cluster": "ktest.cluster",
    "ObjectRef": "ktest.cluster",
    "load_manifests": "ktest.cluster",
    "resolve_assets": "ktest.assets",
    "Assets": "ktest.assets",
    "eventually": "ktest.wait",
    "consistently": "ktest.wait",
    "assert_matches": "ktest.wait",
    "ConcurrentWriter": "ktest.assertions",
    "assert_condition": "ktest.assertions",
    "assert_converts": "ktest.assertions",
    "assert_defaulted": "ktest.assertions",
    "assert_rejected": "ktest.assertions",
    "assert_conflict_on_stale_update": "ktest.assertions",
    "assert_deletion_blocked": "ktest.assertions",
    "assert_garbage_collected": "ktest.assertions",
    "assert_gone": "ktest.assertions",
    "assert_has_finalizer": "ktest.assertions",
    "assert_observed_generation": "ktest.assertions",
    "assert_orphaned": "ktest.assertions",
    "assert_owned_by": "ktest.assertions",
    "assert_quiescent": "ktest.assertions",
    "assert_status_subresource": "ktest.assertions",
    "assert_survives_concurrent_writes": "ktest.assertions",
    "assert_transition_time_stable": "ktest.assertions",
    "finalizer_scenario": "ktest.assertions",
    "stale_copy": "ktest.assertions",
    "KtestError": "ktest.errors",
    "AssetsError": "ktest.errors",
    "ControlPlaneError": "ktest.errors",
    "ClusterError": "ktest.errors",
    "ApiError": "ktest.api_error",
    "ManifestError": "ktest.errors",
    "CRDError": "ktest.errors",
    "OperatorError": "ktest.errors",
    "ConfigError": "ktest.errors",
    "KindError": "ktest.errors",
    "WebhookError": "ktest.errors",
    "KindHandle": "ktest.kind.handle",
    "Webhooks": "ktest.webhooks",
    "image_from_binary": "ktest.kind.binary_image",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
