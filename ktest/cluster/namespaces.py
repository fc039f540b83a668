"""Namespaces that really go away: creation, deletion, and stuck finalizers.

A namespace's deletion completes only once the namespace controller has emptied it (after a fixed
5 s), and an object whose finalizer nobody removes holds it ``Terminating`` forever. Teardown must
neither hang nor hide the cause: :func:`delete_namespace` reports which objects and finalizers hold
the namespace, then removes those finalizers and says so.

A process killed with ``kill -9`` deletes nothing, so on a cluster that outlives it (``existing``)
every namespace ktest creates names its holder (:data:`HOLDER_ANNOTATION`), signed with this
user's key (:mod:`ktest.base.user_secret`), and :func:`sweep_dead_namespaces` deletes those whose
signature holds and whose holder ran on this machine and is certainly dead.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ktest.base import user_secret
from ktest.base.bounded import join_thread
from ktest.base.procfs import Holder, process_namespace
from ktest.cluster.refs import ObjectRef
from ktest.errors import ClusterError
from ktest.errors.api import ApiError

if TYPE_CHECKING:
    from ktest.cluster.client import ClusterClient

log = logging.getLogger("ktest.namespaces")

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "ktest"
WORKER_LABEL = "ktest.dev/worker"
"""Set on every test namespace to the pytest-xdist worker that made it (``gw0``...; ``main``
without xdist): a session-scoped operator runs once per worker on the one shared cluster,
so it must serve only its own worker's namespaces (``worker_namespace_selector``)."""
HOLDER_ANNOTATION = "ktest.dev/holder"
"""On every namespace ktest creates: the process that will delete it (JSON: pid, start time,
``where`` they mean something, host name, and ``mac``: those and the namespace's name signed with
this user's key); removed when a namespace is kept on purpose."""
DNS_LABEL_MAX = 63
_REAPER_GRACE = 60.0
"""Seconds a deletion's thread may take beyond its timeout (its last requests, the report)."""


def dns_label(text: str, *, suffix: str = "", max_length: int = DNS_LABEL_MAX) -> str:
    """``text`` turned into a valid DNS label (RFC 1123), ending with ``suffix`` if given.

    >>> dns_label("tests/test_x.py::test_Finalizer[param-1]", suffix="a1b2")
    'test-x-py-test-finalizer-param-1-a1b2'
    """
    path, separator, rest = text.partition("::")  # drop a node id's directories, not a param's '/'
    text = path.rsplit("/", 1)[-1] + separator + rest
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "ns"
    if slug[0].isdigit():
        slug = "n" + slug
    room = max_length - (len(suffix) + 1 if suffix else 0)
    slug = slug[:room].rstrip("-")
    return f"{slug}-{suffix}" if suffix else slug


def unique_name(text: str) -> str:
    """A DNS label derived from ``text`` with a random suffix (unique across workers and runs)."""
    return dns_label(text, suffix=secrets.token_hex(3))


@dataclass(frozen=True)
class HeldObject:
    """An object whose finalizers kept its namespace from terminating."""

    ref: ObjectRef
    finalizers: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.ref} (finalizers: {', '.join(self.finalizers)})"


@dataclass
class NamespaceCleanup:
    """What deleting a namespace took; ``forced`` means ktest removed finalizers."""

    name: str
    deleted: bool = False
    seconds: float = 0.0
    held_by: list[HeldObject] = field(default_factory=list)
    forced: bool = False
    note: str = ""
    requested_by: str = ""  # who asked for it (a test id), for reports of background deletions
    error: BaseException | None = None  # why a background deletion failed

    def summary(self) -> str:
        if not self.held_by:
            return self.note or f"namespace {self.name} deleted in {self.seconds:.1f}s"
        objects = "\n  ".join(str(held) for held in self.held_by)
        action = (
            "ktest removed these finalizers so the session can go on (in a real cluster the "
            "namespace would stay Terminating: the operator must remove its finalizers)"
            if self.forced
            else "finalizers left in place"
        )
        return f"namespace {self.name} was held in Terminating by:\n  {objects}\n{action}"


def create_namespace(cluster: ClusterClient, name: str, *, labels: Mapping[str, str] | None = None) -> str:
    """Create namespace ``name``, labelled as ktest's own so that ktest may delete it later, and
    held by this process: once it is dead, :func:`sweep_dead_namespaces` deletes what it left."""
    all_labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE, **(labels or {})}
    annotations = {HOLDER_ANNOTATION: holder_annotation(name)}
    metadata = {"name": name, "labels": all_labels, "annotations": annotations}
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
    return name


def holder_annotation(name: str) -> str:
    """The value of :data:`HOLDER_ANNOTATION` for namespace ``name``, created by this process."""
    current = Holder.current()
    holder = NamespaceHolder(current.pid, current.start_time, process_namespace(), socket.gethostname())
    record: dict[str, object] = {
        "pid": holder.pid, "start": holder.start, "where": holder.where, "host": holder.host
    }
    try:
        record["mac"] = user_secret.sign(holder.signed_text(name))
    except OSError as error:  # no usable key (a read-only home): no sweep will delete it, say so once
        if not _unsigned_warned.is_set():
            _unsigned_warned.set()
            log.warning(
                "test namespaces are created unsigned, so no later sweep deletes them after a kill -9: %s",
                error,
            )
    return json.dumps(record, separators=(",", ":"))


_unsigned_warned = threading.Event()


@dataclass(frozen=True)
class NamespaceHolder:
    """Who holds a namespace, read from its :data:`HOLDER_ANNOTATION`."""

    pid: int
    start: str
    where: str
    host: str
    mac: str = ""

    @classmethod
    def of(cls, namespace: Mapping[str, object]) -> NamespaceHolder | None:
        metadata = namespace.get("metadata")
        annotations = (metadata.get("annotations") if isinstance(metadata, dict) else None) or {}
        try:
            record = json.loads(str(annotations.get(HOLDER_ANNOTATION) or ""))
            pid, start, where = int(record["pid"]), str(record["start"]), str(record["where"])
            return cls(pid, start, where, str(record.get("host") or ""), str(record.get("mac") or ""))
        except (ValueError, TypeError, KeyError):
            return None

    def signed_text(self, name: str) -> str:
        """What the ``mac`` signs: the holder and the namespace's name (a copied annotation
        does not hold for another namespace)."""
        return json.dumps([name, self.pid, self.start, self.where, self.host])

    def signed_for(self, name: str) -> bool:
        """True when this user's ktest signed this holder for namespace ``name``."""
        return user_secret.signed(self.signed_text(name), self.mac)

    def on_this_machine(self) -> bool:
        """Recorded in this boot and pid namespace, where pid and start time can be checked."""
        return self._holder().recorded_here()

    def certainly_dead(self) -> bool:
        """Recorded here, and no process runs with that pid and start time any more."""
        return self._holder().certainly_dead()

    def _holder(self) -> Holder:
        return Holder(self.pid, self.start, self.where)


def release_namespace(cluster: ClusterClient, name: str) -> None:
    """Drop the holder of a namespace kept on purpose, so no sweep deletes it."""
    unheld = {"metadata": {"annotations": {HOLDER_ANNOTATION: None}}}
    _patch_unless_gone(cluster, ObjectRef("v1", "Namespace", name), unheld)  # gone: nothing to keep


@dataclass
class NamespaceSweep:
    """What :func:`sweep_dead_namespaces` did: namespaces deleted, and those of other machines left."""

    deleted: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)  # "name (host)": holders this machine cannot judge
    unsigned: list[str] = field(default_factory=list)  # labelled as ktest's here, not signed by this user's
    error: str = ""

    def summary(self) -> str:
        lines = []
        if self.deleted:
            lines.append(
                "deleted namespaces left by killed ktest sessions of this machine: " + ", ".join(self.deleted)
            )
        if self.elsewhere:
            lines.append(
                "left alone, held by ktest sessions of other machines (or of this one before a reboot, or "
                "of another container); delete them by hand once those are over: " + ", ".join(self.elsewhere)
            )
        if self.unsigned:
            lines.append(
                "left alone, labelled as ktest's but not signed with this user's key "
                f"({user_secret.secret_path()}): made by hand, by another user's ktest or by an "
                "older ktest; delete them by hand if they are test namespaces: " + ", ".join(self.unsigned)
            )
        if self.error:
            lines.append(f"could not look for namespaces left by killed ktest sessions: {self.error}")
        return "\n".join(lines)


def sweep_dead_namespaces(cluster: ClusterClient) -> NamespaceSweep:
    """Delete the namespaces labelled ``managed-by=ktest`` whose holder process ran on this machine
    and is dead (``kill -9``: it deleted nothing); never raises.

    Left alone: namespaces of live holders, of holders recorded elsewhere (another machine,
    container, or boot: their pid says nothing here), without a holder (kept on purpose, or
    made by an older ktest), whose holder is not signed with this user's key for that
    namespace (the label and annotation are anyone's to copy who may patch namespaces), and
    those already being deleted. The deletion is requested, not
    waited for: the cluster's namespace controller empties them.
    """
    report = NamespaceSweep()
    try:
        found = cluster.list("v1", "Namespace", label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}")
    except Exception as error:  # housekeeping: e.g. a user who may not list namespaces
        report.error = str(getattr(error, "message", "") or error).splitlines()[0]
        return report
    for namespace in found:
        metadata = namespace.get("metadata") or {}
        holder = NamespaceHolder.of(namespace)
        if holder is None or metadata.get("deletionTimestamp"):
            continue
        if not holder.on_this_machine():
            report.elsewhere.append(f"{metadata.get('name')} ({holder.host or 'unknown host'})")
            continue
        if not holder.certainly_dead():
            continue
        try:
            genuine = holder.signed_for(str(metadata.get("name")))
        except OSError as error:  # the key cannot be read: delete nothing
            report.error = str(error)
            return report
        if not genuine:
            report.unsigned.append(str(metadata.get("name")))
            continue
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": metadata.get("uid")}}
        try:
            cluster.rest.request("DELETE", f"/api/v1/namespaces/{metadata.get('name')}", body=body)
        except ApiError as error:
            if error.status not in (404, 409):  # gone meanwhile, or another namespace of that name now
                report.error = error.message
            continue
        report.deleted.append(str(metadata.get("name")))
    return report


def delete_namespace(
    cluster: ClusterClient,
    name: str,
    *,
    timeout: float = 60.0,
    force_finalizers_after: float = 15.0,
) -> NamespaceCleanup:
    """Delete a namespace ktest created and wait until it is gone.

    When the namespace controller reports that only finalizers are left and
    ``force_finalizers_after`` more seconds pass, the objects those finalizers
    hold are reported and their finalizers removed. Raises :class:`ClusterError`
    if the namespace is not ktest's or is still there after ``timeout``.
    """
    started = time.monotonic()
    finished = request_namespace_deletion(cluster, name)
    if finished is not None:
        return finished
    return await_namespace_deletion(
        cluster, name, started=started, timeout=timeout, force_finalizers_after=force_finalizers_after
    )


def request_namespace_deletion(cluster: ClusterClient, name: str) -> NamespaceCleanup | None:
    """Send the DELETE for a namespace ktest created; a final report when there is nothing
    to wait for (already gone, or no namespace controller to empty it), else None."""
    report = NamespaceCleanup(name)
    ref = ObjectRef("v1", "Namespace", name)
    current = cluster.get_or_none(ref)
    if current is None:
        report.deleted = True
        return report
    labels = current["metadata"].get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
        raise ClusterError(
            f"refusing to delete namespace {name}: ktest did not create it "
            f"(it lacks the label {MANAGED_BY_LABEL}={MANAGED_BY_VALUE})"
        )
    if not current["metadata"].get("deletionTimestamp"):  # deleting it again would be a 409 Conflict
        cluster.delete(ref, missing_ok=True)
    if not cluster.namespace_controller_available:
        report.note = (
            f"namespace {name} left Terminating: no namespace controller runs on this cluster "
            "(controllers turned off), so nothing empties and removes it"
        )
        return report
    return None


def await_namespace_deletion(
    cluster: ClusterClient,
    name: str,
    *,
    started: float,
    timeout: float,
    force_finalizers_after: float,
) -> NamespaceCleanup:
    """Wait until a namespace whose deletion was requested is gone (see :func:`delete_namespace`)."""
    report = NamespaceCleanup(name)
    ref = ObjectRef("v1", "Namespace", name)
    deadline = started + timeout
    held_since: float | None = None
    while time.monotonic() < deadline:
        current = cluster.get_or_none(ref)
        if current is None:
            report.deleted = True
            break
        # The namespace controller says when only finalizers are left; the grace counts from then.
        if held_since is None and _finalizers_remaining(current):
            held_since = time.monotonic()
        grace_over = held_since is not None and time.monotonic() - held_since >= force_finalizers_after
        if grace_over and not report.forced:
            report.held_by = objects_with_finalizers(cluster, name, deleting_only=True)
            for held in report.held_by:
                log.warning("namespace %s held by %s: removing its finalizers", name, held)
                _patch_unless_gone(cluster, held.ref, {"metadata": {"finalizers": None}})
            report.forced = bool(report.held_by)
        wake = deadline
        if held_since is not None and not report.forced:  # the grace's end needs a look of its own
            wake = min(wake, held_since + force_finalizers_after)
        cluster.wait_for_change(ref, current, wake - time.monotonic())
    report.seconds = time.monotonic() - started
    if not report.deleted:
        holders = objects_with_finalizers(cluster, name)
        raise ClusterError(
            f"namespace {name} still exists {timeout:.0f}s after deletion"
            + (": held by " + "; ".join(str(h) for h in holders) if holders else "")
        )
    return report


def _finalizers_remaining(namespace: dict) -> bool:
    conditions = (namespace.get("status") or {}).get("conditions") or ()
    return any(
        c.get("type") == "NamespaceFinalizersRemaining" and c.get("status") == "True" for c in conditions
    )


def objects_with_finalizers(
    cluster: ClusterClient, namespace: str, *, deleting_only: bool = False
) -> list[HeldObject]:
    """Every object in ``namespace`` that carries at least one finalizer (and is being deleted)."""
    held = []
    for api_version in cluster.discovery.preferred_api_versions():
        for info in cluster.discovery.group_version_resources(api_version).values():
            if not info.namespaced or "list" not in info.verbs:
                continue
            try:
                items = cluster.list(api_version, info.kind, namespace)
            except ApiError:
                continue  # e.g. aggregated APIs that are unavailable; nothing we can clear there
            for item in items:
                finalizers = tuple(item["metadata"].get("finalizers") or ())
                if finalizers and (item["metadata"].get("deletionTimestamp") or not deleting_only):
                    held.append(HeldObject(ObjectRef.of(item), finalizers))
    return held


def _patch_unless_gone(cluster: ClusterClient, ref: ObjectRef, patch: Mapping[str, object]) -> None:
    try:
        cluster.patch(ref, patch)
    except ApiError as error:
        if error.status != 404:
            raise


class NamespaceReaper:
    """Deletes namespaces in the background so tests do not wait out the 5 s grace period.

    Each namespace is still really deleted and waited for, and stuck
    finalizers are still reported and removed, on a background thread while
    later tests run. :meth:`drain` blocks until every deletion handed over so
    far has finished (operators must keep running until then, to process
    their finalizers: :class:`~ktest.operators.OperatorHandle` drains before
    it stops) and returns one report per namespace, failures included.
    """

    def __init__(
        self, cluster: ClusterClient, *, timeout: float = 60.0, force_finalizers_after: float = 15.0
    ) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self.force_finalizers_after = force_finalizers_after
        self._lock = threading.Lock()
        self._threads: dict[threading.Thread, str] = {}  # each deletion's thread: its namespace
        self._reports: list[NamespaceCleanup] = []

    def submit(self, name: str, *, requested_by: str = "") -> None:
        """Delete ``name`` now and wait for it on a background thread."""
        started = time.monotonic()
        try:
            finished = request_namespace_deletion(self.cluster, name)
        except Exception as error:  # reported by drain(), in the caller's thread
            finished = NamespaceCleanup(name, error=error)
        if finished is not None:
            self._record(finished, requested_by)
            return
        thread = threading.Thread(
            target=self._reap, args=(name, requested_by, started), name=f"ktest-reap-{name}", daemon=True
        )
        with self._lock:
            self._threads[thread] = name
        thread.start()

    def pending(self) -> int:
        with self._lock:
            return sum(thread.is_alive() for thread in self._threads)

    def join(self, only: Callable[[str], bool] | None = None) -> None:
        """Wait for the deletions submitted so far (of the namespaces ``only`` accepts, if given).

        Their reports stay for :meth:`drain`.
        """
        while True:
            with self._lock:
                self._threads = {thread: ns for thread, ns in self._threads.items() if thread.is_alive()}
                threads = [(thread, ns) for thread, ns in self._threads.items() if only is None or only(ns)]
            if not threads:
                return
            for thread, ns in threads:
                join_thread(thread, self.timeout + _REAPER_GRACE,
                            f"the background deletion of namespace {ns}", ClusterError)

    def drain(self) -> list[NamespaceCleanup]:
        """Wait for every submitted deletion; one report each (``error`` set on failures)."""
        self.join()
        with self._lock:
            reports, self._reports = self._reports, []
        return reports

    def _reap(self, name: str, requested_by: str, started: float) -> None:
        try:
            report = await_namespace_deletion(
                self.cluster, name, started=started, timeout=self.timeout,
                force_finalizers_after=self.force_finalizers_after,
            )
        except Exception as error:  # reported by drain(), in the caller's thread
            report = NamespaceCleanup(name, error=error)
        self._record(report, requested_by)

    def _record(self, report: NamespaceCleanup, requested_by: str) -> None:
        report.requested_by = requested_by
        with self._lock:
            self._reports.append(report)
