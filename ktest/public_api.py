"""ktest's public API, listed once: every name a user may import, and from where.

A name listed here stays importable from that place. A name that moves is listed
in ``MOVED`` under its old place: importing it from there still works and warns
(``DeprecationWarning``) for at least one minor release, and CHANGELOG.md says
so. ``tests/test_public_api.py`` imports every name listed here, checks that
each package's ``__all__`` is listed, that every moved name still resolves, and
that each lazily exporting package imports every name it lists here under
``if TYPE_CHECKING:`` (the types mypy and pyright see; tests/test_typing.py runs
them on a user's code). The ``ktest`` package's own lazy exports are ``TOP_LEVEL``.
"""

from __future__ import annotations

VERSION = "0.1.0"
"""ktest's version (``ktest.__version__``, ``ktest --version``, the wheel's)."""

ASSERTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "assert_has_finalizer": ("finalizers", ()),
    "assert_deletion_blocked": ("finalizers", ()),
    "assert_gone": ("finalizers", ()),
    "assert_owned_by": ("ownership", ()),
    "assert_garbage_collected": ("ownership", ()),
    "assert_orphaned": ("ownership", ()),
    "assert_status_subresource": ("status", ()),
    "assert_observed_generation": ("status", ()),
    "assert_condition": ("conditions", ()),
    "assert_transition_time_stable": ("conditions", ("trigger",)),
    "assert_quiescent": ("quiescence", ()),
    "assert_rejected": ("webhooks", ("action",)),
    "assert_defaulted": ("webhooks", ()),
    "assert_converts": ("webhooks", ()),
    "assert_round_trips": ("crd_versions", ()),
    "assert_stored_as": ("crd_versions", ()),
    "stale_copy": ("conflicts", ()),
    "assert_conflict_on_stale_update": ("conflicts", ("write",)),
    "assert_survives_concurrent_writes": ("conflicts", ("converged", "trigger")),
    "assert_no_hot_loop": ("traffic", ()),
    "assert_recovers": ("traffic", ("then", "action")),
    "assert_backs_off": ("traffic", ("trigger",)),
    "assert_relists_after_410": ("traffic", ()),
    "assert_objects_intact": ("upgrade", ()),
    "assert_recovered_after_upgrade": ("upgrade", ()),
    "assert_no_removed_api_calls": ("upgrade", ()),
}
"""Every ready assertion, declared once: name -> (its module in ``ktest.assertions``, the
arguments its async twin in ``ktest.assertions.aio`` accepts as coroutine functions). The
package's exports, the async twins and the top level's names are made from it."""

ASSERTION_HELPERS: dict[str, str] = {
    "ConcurrentWriter": "conflicts",
    "ConflictNotMetWarning": "conflicts",
    "ConflictInjector": "conflict_injection",
    "FinalizerScenario": "finalizers",
    "finalizer_scenario": "finalizers",
    "Quiescence": "quiescence",
    "StatusSubresourceReport": "status",
    "TransitionHistory": "conditions",
    "condition_shape_problems": "conditions",
    "owner_reference_problems": "ownership",
    "ObjectSnapshot": "upgrade",
    "UpgradeRecovery": "upgrade",
    "snapshot_objects": "upgrade",
}
"""What ``ktest.assertions`` offers beside the assertions: name -> its module there."""

ADD_ON_ASSERTIONS: dict[str, str] = {
    "webhooks": "ktest.webhooks.assertions",
    "crd_versions": "ktest.crd_versions.assertions",
    "upgrade": "ktest.plane_upgrade.assertions",
}
"""The modules of ``ASSERTIONS`` and ``ASSERTION_HELPERS`` that live in an add-on package (the add-on
wing, docs/architecture.md): short name -> the module. ``ktest.assertions`` offers their names too."""


def assertion_module(short: str) -> str:
    """The module a short name of ``ASSERTIONS`` stands for (``"finalizers"`` ->
    ``ktest.assertions.finalizers``, ``"webhooks"`` -> ``ktest.webhooks.assertions``)."""
    return ADD_ON_ASSERTIONS.get(short, f"ktest.assertions.{short}")


_ASSERTIONS_TOP_LEVEL = (*ASSERTIONS, "ConcurrentWriter", "finalizer_scenario")
_ERRORS = (
    "KtestError", "AssetsError", "ControlPlaneError", "ClusterError", "ManifestError", "CRDError",
    "OperatorError", "ConfigError", "KindError", "WebhookError",
)

TOP_LEVEL: dict[str, str] = {
    "ControlPlane": "ktest.controlplane",
    "Cluster": "ktest.cluster",
    "ObjectRef": "ktest.cluster",
    "load_manifests": "ktest.cluster",
    "resolve_assets": "ktest.assets",
    "Assets": "ktest.assets",
    "eventually": "ktest.wait",
    "consistently": "ktest.wait",
    "assert_matches": "ktest.wait",
    **{name: "ktest.assertions" for name in _ASSERTIONS_TOP_LEVEL},
    **{name: "ktest.errors" for name in _ERRORS},
    "ApiError": "ktest.errors.api",
    "KindHandle": "ktest.backends.kind.handle",
    "Webhooks": "ktest.webhooks",
    "image_from_binary": "ktest.backends.kind.binary_image",
    "assert_single_writer": "ktest.replicas",
    "assert_failover": "ktest.replicas",
}
"""``import ktest; ktest.<name>``: name -> the module defining it (imported on first use)."""

PUBLIC: dict[str, tuple[str, ...]] = {
    "ktest": (*sorted(TOP_LEVEL), "__version__"),
    "ktest.errors": _ERRORS,
    "ktest.errors.api": ("ApiError",),
    "ktest.assertions": (*ASSERTIONS, *ASSERTION_HELPERS, "aio"),
    "ktest.assertions.aio": _ASSERTIONS_TOP_LEVEL,
    "ktest.wait": (
        "ListKeys", "ReadTarget", "WaitDefaults", "aio", "assert_matches", "close_hub", "consistently",
        "current_defaults", "diff", "eventually", "record_read", "recording_reads", "use_defaults",
    ),
    "ktest.operators": (
        "CallableOperator", "Denial", "ExpectedCrash", "KopfOperator", "OperatorContext", "OperatorCrash",
        "OperatorHandle", "OperatorIdentity", "ProcessOperator", "build_go_binary",
        "finalize_cluster_objects", "finalize_namespace", "find_denials", "load_roles", "namespace_for",
        "operator_for_test", "operator_identity", "plan_go_build", "run_callable", "run_kopf",
        "run_subprocess",
    ),
    "ktest.operators.pytest_fixtures": (
        "namespace_for", "operator_for_test", "finalize_namespace", "finalize_cluster_objects",
    ),
    "ktest.cluster": (
        "FIELD_MANAGER", "Cluster", "KindRef", "ObjectRef", "RefLike", "StorageMigration", "UserIssuer",
        "as_kind", "as_ref", "evolve_crd", "load_manifests", "migrate_storage",
    ),
    "ktest.controlplane": ("ControlPlane", "ManagedProcess"),
    "ktest.nodes": ("Behaviour", "Kubelet", "NodePool", "SimulatedNodes", "SimulationError"),
    "ktest.operator_upgrade": (
        "ObjectChange", "ObjectKey", "OperatorUpgrade", "OperatorVersion", "callable_version",
        "command_version", "kopf_version", "operator_upgrade",
    ),
    "ktest.rbac_audit": (
        "Need", "RbacAuditError", "RbacComparison", "RequestRecord", "ShippedRule", "compare_rules",
        "derived_roles", "derived_yaml", "shipped_rules",
    ),
    "ktest.replicas": (
        "Failover", "Leadership", "Lock", "OperatorReplicas", "assert_failover", "assert_single_writer",
        "kopf_peering",
    ),
    "ktest.assets": (
        "ALL_BINARIES", "OPTIONAL_BINARIES", "REQUIRED_BINARIES", "SOURCES", "Assets", "Progress", "Selector",
        "parse_selector", "resolve_assets", "KubeVersion",
    ),
    "ktest.proxy": (
        "Call", "FaultRuleError", "Faults", "Injection", "OperatorProxy", "Rule", "Traffic",
        "UnusedFaultRuleWarning",
    ),
    "ktest.faults": (
        "FaultRuleError", "Rule", "UnusedFaultRuleWarning", "close_watches", "conflict", "gone", "latency",
        "reset", "server_error", "throttle",
    ),
    "ktest.webhooks": ("AdmissionRequest", "CallLog", "Denied", "Handlers", "WebhookCall", "Webhooks"),
    "ktest.run_context": (
        "HealthCheck", "RunContext", "SectionProvider", "add_health_check", "add_report_section",
        "check_health",
        "current", "current_test", "note_created", "on_each_test", "run_context", "use_context",
    ),
    "ktest.timeline": ("SCHEMA", "Event", "Recorder", "TimelineData", "recording", "render", "write_page"),
    "ktest.backends.kind.handle": ("DeployedOperator", "KindHandle"),
    # Where the session's cluster comes from, for plain Python (docs/guides/plain-python.md).
    "ktest.backends": ("open_backend", "open_session"),
    # The door for backend and binary-source authors (docs/architecture.md, "Backends are plug-ins").
    "ktest.extension": (
        "AttachedBackend", "Backend", "BackendSpec", "BackendVersions", "BinarySource", "CiContext",
        "CiSteps", "ClusterShare", "ConfigError", "ForeignOption", "Holder", "JanitorHandle", "LogExport",
        "Progress", "Settings", "Source", "Spec", "add_setting_option", "flag", "held_directory",
        "parse_bool", "parse_choice", "parse_image_reference", "parse_path", "parse_paths", "parse_seconds",
        "parse_text", "setting", "settings_from_env",
    ),
    # ktest's own control plane as a backend, for a backend that runs it under its own name.
    "ktest.backends.bare.backend": ("BareBackend", "share_of"),
}
"""Module -> the public names it offers.

A module named here offers only these names: every other name it defines starts with an
underscore. A module not named here (nor in ``MOVED``) is private, whatever its names: it may
change or go without notice (``ktest.cluster.cluster``: import ``Cluster`` from ``ktest.cluster``).
Every package's ``__init__`` counts as named here: one that is not offers no public-looking name.
``tests/test_public_api.py`` checks both rules."""

MOVED: dict[str, dict[str, str]] = {
    # 0.1.0: ApiError left ktest.errors, so that the CLI and the control plane need not
    # import the kubernetes package.
    "ktest.errors": {"ApiError": "ktest.errors.api"},
    # After 0.1.0: one home for errors, the run context's module named for it, and all
    # of kind in its backend's package.
    "ktest.api_error": {"ApiError": "ktest.errors.api"},
    "ktest.context": {name: "ktest.run_context" for name in ("run_context", "check_health", "current_test")},
    "ktest.kind.handle": {"KindHandle": "ktest.backends.kind.handle"},
    "ktest.kind.binary_image": {"image_from_binary": "ktest.backends.kind.binary_image"},
}
"""Old module -> {name: the module that holds it now}: still importable from the old place, with a
DeprecationWarning."""
