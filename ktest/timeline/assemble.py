"""Building a timeline's events from what a recording collected: the operators' calls and log
lines (read from their marks on), the API server's watch events (diffs between consecutive
resourceVersions of each object, deletions the garbage collector or the namespace controller made),
Events. Kept apart from :mod:`ktest.timeline.recorder`, which only collects."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from ktest.operators.logs import OperatorLog
from ktest.proxy.api_request import WRITE_VERBS, ApiRequest
from ktest.proxy.traffic import Call, Traffic
from ktest.timeline.model import (
    Event,
    TimelineData,
    cut,
    object_diff,
    without_secret_values,
)
from ktest.timeline.pod_writers import node_event_lane, pod_writer_event
from ktest.timeline.watches import UNREACHABLE, ResourceKey, ResourceWatch, Seen

MAX_LOG_LINES = 3000
"""Per operator: the latest log lines kept."""
MAX_DELIVERIES = 2000
"""Per operator: the latest watch events delivered to it that are shown."""
DELIVERY_SLACK = 0.05
"""Seconds a delivery to an operator may seem to precede the API server's view of its write
(the two are timed by different threads)."""
REPLAY_SLACK = 1.0
"""A delivery this long before the first write of its object the view has takes that write's type:
a write the view replayed is placed by its whole-second stamp."""
EARLIER_LINE_SLACK = 0.1
"""Seconds before the start a log line's time may say (clocks round) and still be shown."""
_CONTROLLER_MANAGERS = ("kube-controller-manager",)
_CLOCK = re.compile(r"(\d{2}):(\d{2}):(\d{2})[.,](\d{1,6})")


@dataclass
class Marks:
    """Where each operator's record stood when the recording started (by ``id``)."""

    traffic: dict[int, int] = field(default_factory=dict)
    logs: dict[int, int] = field(default_factory=dict)


@dataclass
class Assembly:
    """The events of one timeline being put together."""

    started: float
    started_wall: float
    _marks: Marks

    def add_operator(
        self,
        timeline: TimelineData,
        traffic: Traffic,
        operators: list[str],
        touched: set[tuple[str | None, str | None]],
        namespaces: set[str],
        deleted: set[tuple[str, str | None, str | None]],
        end: float = float("inf"),
    ) -> None:
        """The operator's calls and notes from the recording's start to ``end`` (seconds)."""
        known = id(traffic) in self._marks.traffic
        offset = traffic.started - self.started
        calls = [
            call
            for call in traffic.calls(since=self._marks.traffic.get(id(traffic), 0))
            if call.at + offset <= end
        ]
        notes = [(at, text) for at, text in traffic.notes() if 0 <= at + offset <= end]
        if not calls and not notes and known:
            return
        lane = f"operator:{traffic.name}"
        if traffic.name not in operators:
            operators.append(traffic.name)
        deliveries: list[Event] = []
        for call in calls:
            request = call.request
            at = call.at + offset
            note_request(request, touched, namespaces, deleted)
            timeline.events.append(Event(lane, "request", at, _call_label(call), _call_detail(call)))
            if call.fault:
                what = request.verb_and_target()
                detail = {"fault": call.fault, "operator": traffic.name, "request": what, "code": call.status}
                timeline.events.append(
                    Event("faults", "fault", at, f"{call.fault}: {what} -> {call.status}", detail)
                )
            for delivered, namespace, name in list(call.event_objects):
                label = (
                    f"watch event to {traffic.name}: {request.resource} "
                    f"{namespace + '/' if namespace else ''}{name}"
                )
                detail = {
                    "resource": request.resource, "namespace": namespace, "name": name,
                    "delivered_to": traffic.name,
                }
                deliveries.append(Event(lane, "watch-event", delivered + offset, label, detail))
        timeline.events += deliveries[-MAX_DELIVERIES:]
        for at, text in notes:
            target = lane if text.startswith("restart") else "faults"
            kind = "log" if target == lane else "fault"
            timeline.events.append(
                Event(target, kind, at + offset, text, {"note": text, "operator": traffic.name})
            )

    def add_log(
        self,
        timeline: TimelineData,
        log: OperatorLog,
        operators: list[str],
        end: float,
        until: int | None = None,
    ) -> None:
        """The operator's log lines from the recording's start mark to ``until`` (its end mark)."""
        known = id(log) in self._marks.logs
        start = self._marks.logs.get(id(log), 0)
        raw = log.read(start)
        text = (raw if until is None else raw[: max(0, until - start)]).decode("utf-8", "replace")
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines and known:
            return
        if log.name not in operators:
            operators.append(log.name)
        lane = f"operator:{log.name}"
        day = time.localtime(self.started_wall)
        last = 0.0
        lines = [line for line in lines if not logged_before(line, day, self.started_wall)]
        for line in lines[-MAX_LOG_LINES:]:
            at = _line_time(line, day, self.started_wall, end)
            last = at if at is not None else last
            timeline.events.append(
                Event(lane, "log", last, line, {"line": cut(line, 2000), "time_from_line": at is not None})
            )

    def add_api_view(
        self,
        timeline: TimelineData,
        seen: list[tuple[ResourceKey, Seen]],
        operators: list[str],
        touched: set[tuple[str | None, str | None]],
        namespaces: set[str],
        deleted: set[tuple[str, str | None, str | None]],
    ) -> None:
        previous: dict[tuple[ResourceKey, str | None, str | None], dict[str, Any]] = {}
        placed: dict[ResourceKey, float] = {}
        """Where each watch's latest event went: one watch's events keep their resourceVersion
        order on the page, even where one is placed by its arrival and the next by its stamp."""
        for key, event in sorted(seen, key=lambda item: _version_order(item[1])):
            meta = event.obj.get("metadata") or {}
            namespace, name = meta.get("namespace"), meta.get("name")
            if namespace is not None and namespace not in namespaces:
                continue
            if namespace is None and (None, name) not in touched and key.resource != "namespaces":
                continue
            if key.resource == "namespaces" and name not in namespaces:
                continue
            at = placed[key] = max(self._when(event), placed.get(key, 0.0))
            if key.resource == "events":
                timeline.events.append(_k8s_event(event.obj, at, operators))
                continue
            object_key = (key, namespace, name)
            old = previous.get(object_key)
            obj = event.obj
            if (key.group, key.resource) == ("", "secrets"):
                obj = without_secret_values(obj)
            previous[object_key] = obj
            rows, more = object_diff(
                old if event.type != "ADDED" else None, obj if event.type != "DELETED" else None
            )
            where = f"{namespace}/{name}" if namespace else str(name)
            changed = ", ".join(row["path"] for row in rows[:3]) + (" …" if len(rows) > 3 else "")
            detail = {
                "type": event.type,
                "resource": str(key),
                "object": f"{key.resource} {where}",
                "resourceVersion": meta.get("resourceVersion"),
                "previousResourceVersion": (old.get("metadata") or {}).get("resourceVersion")
                if old
                else None,
                "diff": rows,
                "diffCut": more,
                "approximate": event.replayed,
            }
            label = f"{event.type} {key.resource} {where} rv {meta.get('resourceVersion')}"
            if event.type in ("MODIFIED", "RELISTED") and changed:
                label += f" ({changed})"
            timeline.events.append(Event("apiserver", "watch-event", at, label, detail))
            what = f"{key.resource} {where}"
            if event.type == "DELETED" and (key.resource, namespace, name) not in deleted:
                by = _deleted_by(event.obj, namespace, deleted)
                if by:
                    references = meta.get("ownerReferences") or ()
                    owners = [f"{ref.get('kind')}/{ref.get('name')}" for ref in references]
                    detail = {"by": by, "object": what, "owners": owners}
                    timeline.events.append(Event("controllers", "gc", at, f"{by} deleted {what}", detail))
            elif (key.group, key.resource) == ("", "pods") and event.type in ("MODIFIED", "RELISTED") and (
                moved := pod_writer_event(old, event.obj, at, where)
            ):
                timeline.events.append(moved)
            elif event.type == "MODIFIED" and _written_by_controllers(event.obj):
                by = "kube-controller-manager"
                detail = {"by": by, "object": what, "diff": rows, "diffCut": more}
                timeline.events.append(Event("controllers", "gc", at, f"{by} wrote {what}", detail))

    @staticmethod
    def type_deliveries(timeline: TimelineData) -> None:
        """Give each watch event delivered to an operator its type (ADDED, MODIFIED, DELETED): the
        proxy counts deliveries per object, the API server's view has the type of the write each
        one follows (the latest write of that object the view saw by then)."""
        writes: dict[tuple[str, str | None, str | None], list[tuple[float, str]]] = {}
        for event in timeline.events:
            if event.lane == "apiserver" and event.kind == "watch-event":
                resource = str(event.detail["resource"]).split(".", 1)[0]
                where = str(event.detail["object"]).split(" ", 1)[1]
                namespace, _, name = where.rpartition("/")
                key = (resource, namespace or None, name)
                writes.setdefault(key, []).append((event.t, event.detail["type"]))
        for history in writes.values():
            history.sort(key=lambda write: write[0])
        for event in timeline.events:
            if event.kind != "watch-event" or not event.lane.startswith("operator:"):
                continue
            detail = event.detail
            history = writes.get((detail["resource"], detail["namespace"], detail["name"]), [])
            before = [kind for at, kind in history if at <= event.t + DELIVERY_SLACK]
            if not before and history and history[0][0] - event.t <= REPLAY_SLACK:
                before = [history[0][1]]  # the view's time of a replayed write is its stamp's second
            detail["type"] = before[-1] if before else "unknown (no write of it in the API server's view)"
            kind = detail["type"].split(" ")[0]
            event.label = event.label.replace("watch event to", f"{kind} watch event to", 1)

    def _when(self, event: Seen) -> float:
        at = event.arrived - self.started
        if not event.replayed:
            return at
        if event.type == "DELETED" and not (event.obj.get("metadata") or {}).get("deletionTimestamp"):
            return at  # its stamps are its writes', not its deletion's: it went at the latest when it arrived
        stamped = _latest_stamp(event.obj)
        if stamped is None:
            return at
        stamp = stamped - self.started_wall  # whole seconds: the write was in [stamp, stamp + 1)
        return at if at < stamp + 1.0 else max(0.0, stamp)


# -------------------------------------------------------------------- helpers


def note_request(
    request: ApiRequest,
    touched: set[tuple[str | None, str | None]],
    namespaces: set[str],
    deleted: set[tuple[str, str | None, str | None]],
) -> None:
    if request.namespace:
        namespaces.add(request.namespace)
    if request.resource == "namespaces" and request.name:
        namespaces.add(request.name)
    if request.name:
        touched.add((request.namespace, request.name))
    if request.verb == "delete":
        deleted.add((request.resource, request.namespace, request.name))
        if request.resource == "namespaces":
            deleted.add(("namespaces", None, request.name))


def _call_label(call: Call) -> str:
    answer = "no answer" if call.status is None else str(call.status)
    return f"{call.request.verb_and_target()} -> {answer}" + (f" [{call.fault}]" if call.fault else "")


def _call_detail(call: Call) -> dict[str, Any]:
    request = call.request
    detail: dict[str, Any] = {
        "method": request.method,
        "path": cut(request.path, 500),
        "code": call.status,
        "verb": request.verb,
        "write": request.verb in WRITE_VERBS,
    }
    if call.latency is not None:
        detail["latency_ms"] = round(call.latency * 1000, 1)
    for name in ("fault", "error", "refused", "closed_by"):
        value = getattr(call, name)
        if value:
            detail[name] = value
    if request.field_manager:
        detail["field_manager"] = request.field_manager
    if call.user_agent:
        detail["user_agent"] = cut(call.user_agent, 120)
    if request.is_watch:
        detail["events"] = call.events
    return detail


def _k8s_event(obj: dict[str, Any], at: float, operators: list[str]) -> Event:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    source = (obj.get("source") or {}).get("component") or obj.get("reportingComponent") or ""
    lane = node_event_lane(source) or _operator_event_lane(source, operators) or "controllers"
    message = obj.get("message") or obj.get("note") or ""
    what = f"{involved.get('kind')}/{involved.get('name')}"
    label = f"{obj.get('type', '')} {obj.get('reason', '')} {what}: {message}"
    detail = {
        "type": obj.get("type"), "reason": obj.get("reason"), "message": cut(message, 1000), "object": what,
        "count": obj.get("count"), "source": source,
    }
    return Event(lane, "k8s-event", at, label, detail)


def _operator_event_lane(source: str, operators: list[str]) -> str | None:
    """The lane of the operator that reported an Event: the one its component names (exactly, or
    as a part of it, as ``memcached-controller`` names ``memcached``); kopf reports as ``kopf``."""
    if not source:
        return None
    named = [name for name in operators if name and (name == source or name in source)]
    if named:
        return f"operator:{max(named, key=len)}"
    if source == "kopf" and operators:
        return f"operator:{operators[-1]}"
    return None


def _deleted_by(
    obj: dict[str, Any], namespace: str | None, deleted: set[tuple[str, str | None, str | None]]
) -> str:
    if namespace is not None and ("namespaces", None, namespace) in deleted:
        return "namespace controller"
    if (obj.get("metadata") or {}).get("ownerReferences"):
        return "garbage collector"
    return ""


def _written_by_controllers(obj: dict[str, Any]) -> bool:
    fields = (obj.get("metadata") or {}).get("managedFields") or ()
    newest = max(fields, key=lambda entry: entry.get("time") or "", default=None)
    return bool(newest and newest.get("manager") in _CONTROLLER_MANAGERS)


def _version_order(seen: Seen) -> tuple[int, float]:
    """The order writes were made in: resourceVersions (etcd's revisions, one sequence for every
    resource), then arrival for a server whose versions are not numbers."""
    version = str((seen.obj.get("metadata") or {}).get("resourceVersion") or "")
    return (int(version) if version.isdigit() else 0, seen.arrived)


def _latest_stamp(obj: dict[str, Any]) -> float | None:
    from datetime import datetime

    meta = obj.get("metadata") or {}
    stamps = [entry.get("time") for entry in meta.get("managedFields") or ()]
    stamps += [meta.get("creationTimestamp"), meta.get("deletionTimestamp")]
    times = []
    for stamp in stamps:
        if stamp:
            try:
                times.append(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp())
            except ValueError:
                continue
    return max(times) if times else None


def _line_clocks(line: str, day: time.struct_time, started_wall: float) -> tuple[float, ...]:
    """Seconds since the start of the time a log line names (HH:MM:SS.fff), read as local time
    and as UTC; none if the line names no time."""
    import calendar

    match = _CLOCK.search(line[:60])
    if match is None:
        return ()
    hours, minutes, seconds, fraction = match.groups()
    clock = (int(hours), int(minutes), int(seconds))
    fraction_seconds = int(fraction) / 10 ** len(fraction)
    parts = (day.tm_year, day.tm_mon, day.tm_mday, *clock, 0, 0, -1)
    local = time.mktime(parts) + fraction_seconds - started_wall
    utc = calendar.timegm(parts[:6]) + fraction_seconds - started_wall
    return (local, utc)


def _line_time(line: str, day: time.struct_time, started_wall: float, end: float) -> float | None:
    """Seconds since the start of the time a log line names (local time or UTC), if in the recording."""
    for at in _line_clocks(line, day, started_wall):
        if -5 <= at <= end + 5:
            return at
    return None


def logged_before(line: str, day: time.struct_time, started_wall: float) -> bool:
    """Whether a line's own time says it was logged before the recording began (read either way,
    local or UTC): a line an operator's output buffer held back, or an earlier test's."""
    clocks = _line_clocks(line, day, started_wall)
    return bool(clocks) and all(at < -EARLIER_LINE_SLACK for at in clocks)


def upgrade_events(upgrades: list[Any], started: float) -> list[Event]:
    """An ``upgrade`` event per control-plane upgrade
    (:class:`~ktest.controlplane.upgrade_report.UpgradeReport`), spanning it, on the controllers
    lane: where the reader sees "upgrade 1.36 -> 1.37 here"."""
    events = []
    for report in upgrades:
        versions = f"{report.from_version} -> {report.to_version}"
        label = f"control plane upgrade {versions} ({report.duration:.2f} s)"
        detail = {
            "from": report.from_version, "to": report.to_version,
            "until": round(report.finished - started, 4), "seconds": round(report.duration, 3),
            "no_longer_served": [str(api) for api in report.removed_apis],
        }
        events.append(Event("controllers", "upgrade", report.started - started, label, detail))
    return events


def outage_events(watches: list[ResourceWatch], upgrades: list[Any], started: float) -> list[Event]:
    """A ``gap`` event on the API server's lane for each time its watches could not reach it (a
    restart, an upgrade): from when the streams broke to when they resumed, and whether writes
    made meanwhile were lost (a 410 on the resume) or replayed from the last resourceVersion."""
    spans = sorted(
        ((begin, end, why, watch) for watch in watches for begin, end, why in watch.outages),
        key=lambda span: span[:2],
    )
    merged: list[tuple[float, float, str, list[ResourceWatch]]] = []
    for begin, end, reason, watch in spans:
        if merged and begin <= merged[-1][1] + 0.5:
            first, last, known, members = merged[-1]
            unreachable = UNREACHABLE if UNREACHABLE in (known, reason) else known
            merged[-1] = (first, max(last, end), unreachable, [*members, watch])
        else:
            merged.append((begin, end, reason, [watch]))
    events = []
    for begin, end, why, members in merged:
        for report in upgrades:
            if report.started - 0.5 <= end and begin <= report.finished + 0.5:
                why = f"the control plane was being upgraded ({report.from_version} -> {report.to_version})"
        lost = sorted(
            {str(watch.key) for watch in members if watch.gap_at is not None and watch.gap_at >= begin}
        )
        if lost:
            outcome = (
                "the API server no longer had the writes since (410 Gone) of "
                + ", ".join(lost)
                + ": a list shows each object changed meanwhile once (RELISTED), "
                "the versions in between are missing"
            )
        else:
            outcome = "the watches resumed from their last resourceVersion: no write is missing"
        label = f"no view of the API server for {end - begin:.2f} s: {why}; {outcome}"
        detail = {
            "until": round(end - started, 4), "seconds": round(end - begin, 3), "why": why,
            "watches": sorted({str(watch.key) for watch in members}), "missing": lost,
        }
        events.append(Event("apiserver", "gap", begin - started, label, detail))
    return events
