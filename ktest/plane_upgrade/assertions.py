"""What must hold after an in-place control-plane upgrade (``cp.upgrade("1.37")``): every
object intact, and an operator that reconnected and calls no API the new minor removed.

The operator's assertions read ``op.traffic``: it must run behind ktest's proxy (the default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ktest.assertions.objects import failure, timeout_or_default
from ktest.assertions.traffic import assert_no_hot_loop, calls_text, poll
from ktest.cluster.refs import KindRef, ObjectRef, as_kind
from ktest.wait.report import plural

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster
    from ktest.controlplane.upgrade_report import ServedApi, UpgradeReport
    from ktest.operators.handle import OperatorHandle
    from ktest.proxy.traffic import Call

RULE_OBJECTS_INTACT = (
    "an upgrade replaces kube-apiserver, never the data: every object survives it with its uid "
    "and resourceVersion, and a write during it (a controller, the operator reconciling again) is "
    "a write the upgrade caused"
)
RULE_RECOVERED = (
    "while the control plane is upgraded every connection to it drops; a controller must reconnect "
    "and re-open its watches (resuming or listing again) once the new API server answers, without "
    "rewriting what it already reconciled"
)
RULE_REMOVED_APIS = (
    "each Kubernetes minor stops serving deprecated API versions (the deprecation guide lists them); "
    "an operator must move to a served version before its users' clusters are upgraded, or its "
    "requests fail with 404 after the upgrade"
)


@dataclass(frozen=True)
class ObjectSnapshot:
    """Objects of some kinds at one moment: their identity -> (uid, resourceVersion)."""

    kinds: tuple[tuple[str, str], ...]
    namespace: str | None
    objects: dict[str, tuple[str, str]]

    def __len__(self) -> int:
        return len(self.objects)


def snapshot_objects(
    cluster: Cluster, *kinds: KindRef | tuple[str, str], namespace: str | None = None
) -> ObjectSnapshot:
    """The uid and resourceVersion of every object of ``kinds`` (``("v1", "ConfigMap")``), in
    ``namespace`` or everywhere, to compare with :func:`assert_objects_intact` after an upgrade."""
    if not kinds:
        raise TypeError('snapshot_objects needs at least one kind, e.g. ("v1", "ConfigMap")')
    chosen = tuple(as_kind(kind) for kind in kinds)
    objects: dict[str, tuple[str, str]] = {}
    for api_version, kind in chosen:
        for item in cluster.list(api_version, kind, namespace):
            metadata = item["metadata"]
            identity = str(ObjectRef(api_version, kind, metadata["name"], metadata.get("namespace")))
            objects[identity] = (metadata["uid"], metadata["resourceVersion"])
    return ObjectSnapshot(chosen, namespace, objects)


def assert_objects_intact(cluster: Cluster, before: ObjectSnapshot) -> ObjectSnapshot:
    """Every object of ``before`` still exists with the same uid and resourceVersion (objects
    created since are not judged). Returns the snapshot taken now. On failure the message names
    each object gone, recreated (another uid) or written (another resourceVersion, with who
    wrote it last)."""
    __tracebackhide__ = True
    now = snapshot_objects(cluster, *before.kinds, namespace=before.namespace)
    problems = []
    for identity, (uid, version) in sorted(before.objects.items()):
        found = now.objects.get(identity)
        if found is None:
            problems.append(f"{identity} is gone")
        elif found[0] != uid:
            problems.append(f"{identity} was recreated: uid {uid} -> {found[0]}")
        elif found[1] != version:
            problems.append(
                f"{identity} was written: resourceVersion {version} -> {found[1]}"
                f"{_last_writer(cluster, identity)}"
            )
    if problems:
        raise AssertionError(failure(
            f"{plural(len(problems), 'object')} of {len(before)} did not survive the upgrade intact: "
            f"{problems[0]}",
            RULE_OBJECTS_INTACT,
            problems,
        ))
    return now


def _last_writer(cluster: Cluster, identity: str) -> str:
    """`` (last written by kopf at 12:00:01)``, from the object's managedFields."""
    kind, where, api = identity.split(" ", 2)
    namespace, _, name = where.rpartition("/")
    api_version = api.strip("()")
    obj = cluster.get_or_none((api_version, kind, name, namespace or None))
    entries = (obj or {}).get("metadata", {}).get("managedFields") or []
    if not entries:
        return ""
    last = max(entries, key=lambda entry: entry.get("time") or "")
    return f" (last written by {last.get('manager', '?')} at {last.get('time', '?')})"


# -------------------------------------------------------------------- the operator


@dataclass(frozen=True)
class UpgradeRecovery:
    """What :func:`assert_recovered_after_upgrade` saw: the watches re-opened (resource, seconds
    after the upgrade finished) and the writes counted afterwards."""

    watches: tuple[tuple[str, float], ...]
    writes: dict[str, int]


def assert_recovered_after_upgrade(
    operator: OperatorHandle,
    report: UpgradeReport,
    *,
    timeout: float | None = None,
    window: float | None = None,
    max_writes: int = 2,
) -> UpgradeRecovery:
    """The operator recovered from the upgrade ``report`` describes: within ``timeout`` (default:
    the eventually timeout) it re-opened every watch that was open when the upgrade began, each
    answered by the new API server; then for ``window`` s it writes no object more than
    ``max_writes`` times (:func:`~ktest.assertions.traffic.assert_no_hot_loop`).

    The failure names the watches never re-opened (the symptom of an operator that gave up on
    its connection) and lists the operator's calls since the upgrade began."""
    __tracebackhide__ = True
    traffic = operator.traffic
    began = report.started - traffic.started
    ended = report.finished - traffic.started
    cut = [
        call for call in traffic.calls(verb="watch")
        if call.status == 200 and call.at < began and (call.ended is None or call.ended >= began)
    ]
    if not cut:
        raise AssertionError(failure(
            f"operator {operator.name!r} had no open watch when the upgrade ({report.describe()}) began: "
            "nothing shows it reconnected",
            RULE_RECOVERED,
            ["start the operator (and let it reach its watches) before upgrading",
             *calls_text(traffic.last())],
        ))
    wanted = sorted({(call.resource, call.request.namespace or "") for call in cut})
    limit = timeout_or_default(timeout)
    reopened = poll(
        limit,
        lambda: {key: _reopened(traffic.calls(verb="watch"), key, began) for key in wanted},
        lambda found: None not in found.values(),
    )
    missing = [key for key, call in reopened.items() if call is None]
    if missing:
        names = ", ".join(_watch_name(resource, namespace) for resource, namespace in missing)
        since = [call for call in traffic.calls() if call.ended is None or max(call.at, call.ended) >= began]
        raise AssertionError(failure(
            f"operator {operator.name!r} did not reconnect after the control-plane upgrade "
            f"({report.from_version} -> {report.to_version}): it never re-opened its watch of {names} "
            f"within {limit:g}s, so it no longer sees changes",
            RULE_RECOVERED,
            [f"upgrade: +{began:.2f}s to +{ended:.2f}s in the operator's traffic record",
             "its calls since the upgrade began:", *calls_text(since)],
        ))
    try:
        counts = assert_no_hot_loop(operator, window=window, max_writes=max_writes)
    except AssertionError as error:
        raise AssertionError(f"after the control-plane upgrade ({report.describe()}): {error}") from None
    watches = tuple(
        (_watch_name(*key), round(call.at - ended, 3)) for key, call in reopened.items() if call is not None
    )
    return UpgradeRecovery(watches, counts.per_object)


def _reopened(watches: list[Call], key: tuple[str, str], began: float) -> Call | None:
    """The first watch of ``key`` (resource, namespace) the new API server answered."""
    return next((
        call for call in watches
        if (call.resource, call.request.namespace or "") == key
        and call.at >= began and call.status == 200 and not call.answered_by_fault
    ), None)


def _watch_name(resource: str, namespace: str) -> str:
    return f"{resource} in {namespace}" if namespace else resource


# -------------------------------------------------------------------- removed APIs


def assert_no_removed_api_calls(operator: OperatorHandle, report: UpgradeReport) -> None:
    """None of the operator's requests (its whole traffic record) went to an API the upgrade
    ``report`` says the new minor no longer serves. The failure names each such API, how often the
    operator called it, before and after the upgrade, and where the new minor serves it instead."""
    __tracebackhide__ = True
    from ktest.controlplane.upgrade_report import ServedApi

    removed = set(report.removed_apis)
    if not removed:
        return
    traffic = operator.traffic
    began = report.started - traffic.started
    hits: dict[ServedApi, list[Call]] = {}
    for call in traffic.calls():
        request = call.request
        if not request.resource or not request.version:
            continue
        api = ServedApi(request.group or "", request.version, request.resource)
        if api in removed:
            hits.setdefault(api, []).append(call)
    if not hits:
        return
    lines = []
    for api, calls in sorted(hits.items()):
        after = [call for call in calls if call.at >= began]
        verbs = sorted({call.verb for call in calls})
        instead = report.replacements(api)
        lines.append(
            f"{'/'.join(verbs)} {api}: {plural(len(calls), 'request')}, {len(after)} after the upgrade"
            + (f" (last answered {after[-1].status})" if after and after[-1].status else "")
            + (f"; {report.to_version} serves {api.resource} as {', '.join(instead)}" if instead else
               f"; {report.to_version} serves no version of {api.resource}")
        )
    first = sorted(hits)[0]
    raise AssertionError(failure(
        f"operator {operator.name!r} calls {plural(len(hits), 'API')} Kubernetes {report.to_version} no "
        f"longer serves: {first.resource} ({first.group_version})",
        RULE_REMOVED_APIS,
        [*lines, "its requests to them:", *calls_text([call for calls in hits.values() for call in calls])],
    ))

