"""Recording one test's timeline from the sources ktest already has.

Nothing here slows the test down much: the operators' proxies record their traffic anyway
(:class:`ktest.proxy.traffic.Traffic`), their logs are files anyway
(:class:`ktest.operators.logs.OperatorLog`); both are read once, when the timeline is built, from
the marks taken at the start. Live hooks are two ContextVar observers (the test's own requests in
:mod:`ktest.cluster.rest`, ``eventually``'s attempts in :mod:`ktest.wait.run`) and the API server's
view: one watch per resource the test or an operator touched (:mod:`ktest.timeline.watches`),
plus one of Events. The bodies those watches deliver are kept as they come; diffs are computed
only when a page is built.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from contextvars import Token
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ktest.cluster import rest
from ktest.operators.logs import OperatorLog
from ktest.proxy.api_request import ApiRequest, parse_request
from ktest.proxy.traffic import Traffic
from ktest.timeline.assemble import Assembly, Marks, note_request, outage_events, upgrade_events
from ktest.timeline.model import Event, TimelineData, cut
from ktest.timeline.watches import ResourceKey, ResourceWatch, Seen, current_resource_version
from ktest.wait import run as wait_run

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.controlplane.upgrade_report import UpgradeReport

SCAN_INTERVAL = 0.2
"""Seconds between looks at the operators' new calls for resources to watch."""
SETTLE_QUIET = 0.05
"""When the recording stops: a watch opened lately must have been quiet this long (its replay is in)."""
SETTLE_LIMIT = 0.5
SETTLE_GRACE = 0.02
"""When the recording stops: time for the watches to deliver the events of the last writes."""
_UNWATCHABLE = {
    "events",
    "bindings",
    "tokenreviews",
    "subjectaccessreviews",
    "selfsubjectaccessreviews",
    "localsubjectaccessreviews",
    "selfsubjectrulesreviews",
    "selfsubjectreviews",
    "tokenrequests",
    "evictions",
    "leases",
}
_POD_MAKERS = {
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
}
"""A request about one of these in a namespace also watches its Pods (scheduled, started, ...)."""


class Recorder:
    """One recording: :meth:`start`, the test runs, :meth:`stop`, then :meth:`data` or :meth:`write`.

    Also a context manager (:func:`recording`): an exception leaving the block marks the failure."""

    def __init__(
        self, cluster: Cluster | None = None, *, test: str = "", resources: Iterable[str] = ()
    ) -> None:
        self.cluster = cluster
        self.test = test
        self.started = 0.0
        self.started_wall = 0.0
        self.stopped: float | None = None
        self.outcome = "recorded"
        self._resources_wanted = list(resources)
        self._marks = Marks()
        self._lock = threading.Lock()
        self._events: list[Event] = []
        self._seen: list[tuple[ResourceKey, Seen]] = []
        self._watches: dict[ResourceKey, ResourceWatch] = {}
        self._start_version: str | None = None
        self._failure: tuple[float, str] | None = None
        self._cut: tuple[float, str] | None = None
        self._problems: list[str] = []
        self._tokens: list[tuple[Any, Token[Any]]] = []
        self._scanned: dict[int, int] = {}
        self._starter: threading.Thread | None = None
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._pending: list[ResourceKey] = []
        self._asked: set[ResourceKey] = set()
        self._in_play: set[str] = set()
        """Namespaces the test has touched, or an operator has written in."""
        self._deferred: dict[str, set[ResourceKey]] = {}
        """What operators list or watch in namespaces not in play, watched once they come into it."""
        self._upgrades: list[Any] = []
        self._watches_ended: float | None = None
        self._host = cluster.api_client.configuration.host.rstrip("/") if cluster is not None else None
        self._sources: tuple[list[Traffic], list[OperatorLog]] | None = None
        self._log_ends: dict[int, int] = {}
        self._closed = False
        self._end_version: int | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> Recorder:
        self.started = time.monotonic()
        self.started_wall = time.time()
        self._marks.traffic = {id(traffic): len(traffic) for traffic in list(Traffic.live)}
        self._marks.logs = {id(log): log.mark() for log in list(OperatorLog.live)}
        self._scanned = dict(self._marks.traffic)
        if self.cluster is not None:
            try:
                self._start_version = current_resource_version(self.cluster)
            except Exception as error:
                self._problems.append(f"the API server's view is missing: {type(error).__name__}: {error}")
            if self._start_version is not None:  # the watches start on a thread: the test goes on
                self._starter = threading.Thread(
                    target=self._start_watches, name="ktest-timeline-watches", daemon=True
                )
                self._starter.start()
        observers: list[tuple[Any, Any]] = [
            (rest.request_observers, self._on_request),
            (wait_run.attempt_observers, self._on_attempt),
        ]
        self._tokens = [
            (variable, variable.set((*variable.get(), observer))) for variable, observer in observers
        ]
        return self

    def stop(self, outcome: str | None = None, *, settle: bool = True) -> None:
        """End the recording. ``settle``: first let the watches deliver the last writes (a page
        will be built); without it the recording ends at once (it will be thrown away)."""
        self.end(outcome, keep=settle)
        self.close(settle=settle)

    def end(self, outcome: str | None = None, *, keep: bool = True) -> None:
        """End the recording now, in the test's own thread (its observers are context variables);
        the API server's view stays open until :meth:`close`, which may run on another thread
        while the next test goes on: the page keeps only what came before this moment (``keep``:
        a page will be built, so the API server's version now is read to cut its view there)."""
        if self.stopped is not None:
            return
        if outcome is not None:
            self.outcome = outcome
        for variable, token in reversed(self._tokens):
            try:
                variable.reset(token)
            except ValueError:  # stopped from another context: remove our observer from it instead
                variable.set(
                    tuple(o for o in variable.get() if o not in (self._on_request, self._on_attempt))
                )
        self._tokens = []
        self._stop_starter()
        self.stopped = time.monotonic()
        if keep and self.cluster is not None and self._start_version is not None:
            with contextlib.suppress(Exception):  # without it, the view ends where the settling does
                self._end_version = int(current_resource_version(self.cluster))
        logs = list(OperatorLog.live)  # held until the page is built: a stopped operator's log stays
        self._sources = (list(Traffic.live), logs)
        self._log_ends = {id(log): log.mark() for log in logs}

    def close(self, *, settle: bool = True) -> None:
        """Close the API server's view after :meth:`end`; ``settle``: first let the watches
        deliver the events of the writes made before the end."""
        if self.stopped is None or self._closed:
            return
        self._closed = True
        self._close_view(self.stopped if settle and self._watches_ended is None else None)

    def end_watches(self) -> None:
        """Close the API server's view now (its last writes settled), the rest of the recording
        going on: called before the control plane stops while the test is still being recorded
        (the session's last test, a plane of the test's own), so the stop is not taken for a
        recording cut short."""
        if self._watches_ended is not None or self.stopped is not None:
            return
        self._stop_starter()
        self._watches_ended = time.monotonic()
        self._close_view(self._watches_ended)

    def _stop_starter(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._starter is not None:
            self._starter.join(timeout=2.0)

    def _close_view(self, settle_from: float | None) -> None:
        """Stop the watches; with ``settle_from`` (when the recording or its view ended), first
        watch what the operators' last calls were about and let the writes before then arrive."""
        if settle_from is not None and self._start_version is not None:
            self._scan()
            self._open_pending()
            self._settle(settle_from)
        for watch in list(self._watches.values()):
            watch.stop()

    @property
    def watched(self) -> list[str]:
        """What the API server's view watches (or is opening): ``configmaps in <namespace>``, or a
        cluster-scoped resource's name."""
        with self._lock:
            keys = sorted(self._asked, key=lambda key: (key.namespace or "", str(key)))
        return [f"{key} in {key.namespace}" if key.namespace else str(key) for key in keys]

    def note_upgrade(self, report: UpgradeReport) -> None:
        """Show a control-plane upgrade (what :meth:`ktest.ControlPlane.upgrade` returned) on the
        page: an ``upgrade`` event from its start to its end, and the gap it left in the watches."""
        if all(known.started != report.started for known in self._upgrades):
            self._upgrades.append(report)

    def fail(self, message: str, at: float | None = None) -> None:
        """Mark the failing assertion (``at``: a monotonic time; default now)."""
        when = (time.monotonic() if at is None else at) - self.started
        self._failure = (when, message)
        self.outcome = "failed"

    def cut(self, reason: str, at: float | None = None) -> None:
        """Say the recording stops early (a crash, an interrupt): the page shows where and why."""
        when = (time.monotonic() if at is None else at) - self.started
        if self._cut is None or when < self._cut[0]:
            self._cut = (when, reason)

    def problem(self, text: str) -> None:
        self._problems.append(text)

    def __enter__(self) -> Recorder:
        return self.start() if not self.started else self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if error is None:
            self.stop("passed" if self.outcome == "recorded" else None)
        elif isinstance(error, Exception):
            self.fail(f"{type(error).__name__}: {error}")
            self.stop("failed")
        else:  # KeyboardInterrupt, SystemExit: the test was cut, not failed
            self.cut(f"interrupted by {type(error).__name__}")
            self.stop("interrupted")

    # ------------------------------------------------------------ live hooks

    def _on_request(self, host: str, method: str, path: str, status: int, seconds: float) -> None:
        if self._host is None or host.rstrip("/") != self._host:
            return
        request = parse_request(method, path)
        began = time.monotonic() - seconds - self.started
        label = f"{request.verb_and_target()} -> {status}"
        detail = {
            "method": method,
            "path": cut(path, 500),
            "code": status,
            "latency_ms": round(seconds * 1000, 1),
        }
        with self._lock:
            self._events.append(Event("test", "request", began, label, detail))
        if self._start_version is not None:
            self._watch_request(request, by_test=True, upkeep=rest.upkeep.get())

    def _on_attempt(self, run: wait_run.WaitRun, attempt: wait_run.Attempt) -> None:
        from ktest.wait.report import short_value

        verdict = attempt.verdict.name.lower()
        value = None if attempt.value is wait_run.NO_VALUE else short_value(attempt.value)
        at = run.started + attempt.at - self.started
        label = f"{run.kind} attempt {attempt.number} {verdict}: {run.description}"
        detail = {
            "check": run.description,
            "wait": run.kind,
            "number": attempt.number,
            "verdict": verdict,
            "message": cut(attempt.message, 1000),
            "value": value,
        }
        with self._lock:
            self._events.append(Event("test", "attempt", at, label, detail))

    # ------------------------------------------------------------ watches

    def _watch_request(self, request: ApiRequest, *, by_test: bool, upkeep: bool = False) -> None:
        """Watch what ``request`` was about.

        A write in a namespace, or any request of the test's own there, puts that namespace in
        play: the request's resource and the namespace's Events are watched. An operator's read in
        a namespace not in play is only noted, and watched once the namespace comes into play: a
        session operator watches (and reads in) every earlier test's namespace, which this test
        never touches. ``upkeep``: ktest listing every kind in a namespace for its
        own clean-up, which opens no watch. A list or watch across every namespace adds nothing
        (the namespaces it matters in show up in other requests); a cluster-scoped object's
        resource is watched when the request names it."""
        if not request.resource or not request.version:
            return
        namespace = request.namespace
        if not namespace:
            if request.name:
                self._watch(ResourceKey(request.group, request.version, request.resource))
            return
        key = ResourceKey(request.group, request.version, request.resource, namespace)
        reads = request.verb in ("get", "list", "watch")
        if reads and upkeep:
            return
        with self._lock:
            if reads and not by_test and namespace not in self._in_play:
                self._deferred.setdefault(namespace, set()).add(key)
                return
            waiting = set() if namespace in self._in_play else self._deferred.pop(namespace, set())
            self._in_play.add(namespace)
        for wanted in (key, *waiting):
            self._watch(wanted)
            if (wanted.group, wanted.resource) in _POD_MAKERS:
                self._watch(ResourceKey("", "v1", "pods", namespace))
        self._watch(ResourceKey("", "v1", "events", namespace))

    def _watch_resource_name(self, name: str) -> None:
        assert self.cluster is not None
        discovery = self.cluster.discovery
        for api_version in discovery.all_api_versions():
            group, _, version = api_version.rpartition("/")
            for info in discovery.group_version_resources(api_version).values():
                if name in (info.plural, info.kind, f"{info.plural}.{group}"):
                    self._watch(ResourceKey(group, version, info.plural))
                    return

    def _watch(self, key: ResourceKey) -> None:
        """Ask for a watch of ``key`` (opened by the starter thread, or by :meth:`stop`)."""
        if self.cluster is None or self._start_version is None:
            return
        if self.stopped is not None or self._watches_ended is not None:
            return
        if key.resource in _UNWATCHABLE and (key.group, key.resource) != ("", "events"):
            return
        with self._lock:
            if key in self._asked:  # opened, or being opened (no longer pending, not yet in _watches)
                return
            self._asked.add(key)
            self._pending.append(key)
        self._wake.set()

    def _open_pending(self) -> None:
        assert self.cluster is not None and self._start_version is not None
        with self._lock:
            keys, self._pending = self._pending, []
        for key in keys:
            late = time.monotonic() - self.started > 0.05
            watch = ResourceWatch(self.cluster, key, self._start_version, self._on_seen, late=late)
            with self._lock:
                self._watches[key] = watch
            watch.start()

    def _start_watches(self) -> None:
        """The starter thread: the resources operators already watch, those asked for, then
        each resource the test or an operator turns out to touch."""
        try:
            for traffic in list(Traffic.live):
                for call in traffic.open_watches():
                    self._watch_request(call.request, by_test=False)
            for name in self._resources_wanted:
                self._watch_resource_name(name)
            while not self._stopping.is_set():
                self._open_pending()
                self._wake.wait(SCAN_INTERVAL)
                self._wake.clear()
                self._scan()
        except Exception as error:
            self._problems.append(f"watches could not be opened: {type(error).__name__}: {error}")
            self.cut(f"the recording's watches stopped opening ({type(error).__name__}: {error})")

    def _on_seen(self, key: ResourceKey, seen: Seen) -> None:
        with self._lock:
            self._seen.append((key, seen))

    def _scan(self) -> None:
        """Watch the resources the operators' new calls were about."""
        for traffic in list(Traffic.live):
            since = self._scanned.get(id(traffic), 0)
            calls = traffic.calls(since=since)
            self._scanned[id(traffic)] = since + len(calls)
            for call in calls:
                self._watch_request(call.request, by_test=False)

    def _settle(self, stopped: float) -> None:
        deadline = time.monotonic() + SETTLE_LIMIT
        watches = list(self._watches.values())
        for watch in watches:
            watch.connected.wait(max(0.0, deadline - time.monotonic()))
        time.sleep(max(0.0, SETTLE_GRACE - (time.monotonic() - stopped)))  # the last writes' events
        # a watch opened lately replays its backlog right after its headers: until it goes quiet
        recent = [watch for watch in watches if watch.opened >= stopped - 2 * SETTLE_QUIET]
        while recent and time.monotonic() < deadline:
            newest = max(max(watch.last_arrival, watch.opened) for watch in recent)
            quiet = time.monotonic() - newest
            if quiet >= SETTLE_QUIET:
                return
            time.sleep(SETTLE_QUIET - quiet)

    # ------------------------------------------------------------ the data

    def data(self) -> TimelineData:
        """Everything recorded, as the page shows it (call after :meth:`stop`, or during, for a
        partial timeline)."""
        end = (self.stopped or time.monotonic()) - self.started
        timeline = TimelineData(self.test, self.started_wall, duration=end, outcome=self.outcome)
        with self._lock:
            timeline.events = list(self._events)
            seen = [item for item in self._seen if self._before_end(item[1])]
        operators: list[str] = []
        touched: set[tuple[str | None, str | None]] = set()  # (namespace, name) the test or operators wrote
        namespaces: set[str] = set()
        deleted: set[tuple[str, str | None, str | None]] = set()
        assembly = Assembly(self.started, self.started_wall, self._marks)
        for event in timeline.events:
            if event.kind == "request":
                request = parse_request(event.detail["method"], event.detail["path"])
                note_request(request, touched, namespaces, deleted)
        traffics, logs = self._sources or (list(Traffic.live), list(OperatorLog.live))
        for traffic in traffics:
            try:
                assembly.add_operator(timeline, traffic, operators, touched, namespaces, deleted, end)
            except Exception as error:
                timeline.problems.append(
                    f"the calls of operator {traffic.name}: {type(error).__name__}: {error}"
                )
        for log in logs:
            try:
                assembly.add_log(timeline, log, operators, end, until=self._log_ends.get(id(log)))
            except Exception as error:
                timeline.problems.append(f"the log of operator {log.name}: {type(error).__name__}: {error}")
        timeline.operators = operators
        assembly.add_api_view(timeline, seen, operators, touched, namespaces, deleted)
        assembly.type_deliveries(timeline)
        if self._failure is not None:
            timeline.failure = self._failure
            at, message = self._failure
            label = message.splitlines()[0] if message else "failed"
            detail = {"message": cut(message, 8000)}
            timeline.events.append(Event("test", "assertion-failure", at, label, detail))
        truncated = self._cut
        for watch in self._watches.values():
            if watch.problem and watch.problem_at is not None:
                at = watch.problem_at - self.started
                if truncated is None or at < truncated[0]:
                    truncated = (at, watch.problem)
            if watch.gap:
                timeline.problems.append(watch.gap)
        timeline.truncated = truncated
        timeline.events += upgrade_events(self._upgrades, self.started)
        timeline.events += outage_events(list(self._watches.values()), self._upgrades, self.started)
        timeline.problems += self._problems
        return timeline

    def _before_end(self, seen: Seen) -> bool:
        version = str((seen.obj.get("metadata") or {}).get("resourceVersion") or "")
        return self._end_version is None or not version.isdigit() or int(version) <= self._end_version

    # ------------------------------------------------------------ output

    def write(self, path: str | Path) -> Path:
        """Write the page (self-contained HTML) to ``path``; returns it. Raises OSError."""
        from ktest.timeline.rendering import write_page

        return write_page(self.data(), Path(path))


def recording(cluster: Cluster | None = None, *, test: str = "", resources: Iterable[str] = ()) -> Recorder:
    """``with recording(cluster) as rec: ...`` then ``rec.write("timeline.html")``.

    ``resources``: names (``webapps``, ``WebApp``, ``webapps.example.com``) to watch from the start,
    besides those the test and the operators turn out to touch."""
    return Recorder(cluster, test=test, resources=resources)
