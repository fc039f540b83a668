"""The timeline's data: lanes, events, the failure and where a cut recording stops.

What the page embeds (``schema`` 1)::

    {"schema": 1, "test": "tests/test_x.py::test_y", "outcome": "failed",
     "started": "2026-12-03T15:27:16.123+00:00", "duration": 4.2,
     "lanes": [{"id": "test", "title": "test"}, {"id": "operator:web", ...}, ...],
     "events": [{"lane": "apiserver", "kind": "watch-event", "t": 1.25, "label": "...",
                 "detail": {...}}, ...],
     "failure": {"t": 4.1, "message": "..."} or null,
     "truncated": {"at": 3.9, "reason": "..."} or null,
     "dropped": {"log": 120}}

Times are seconds since the recording started. Object diffs are computed here from the bodies the
API server sent for two resourceVersions of one object: only the rows that changed are kept, each
value cut to :data:`MAX_VALUE_CHARS`, so the page stays small however big the objects are.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

SCHEMA = 1

MAX_VALUE_CHARS = 200
"""A value in a diff, a log line's text, an attempt's value: cut to this many characters."""
MAX_DIFF_ROWS = 60
"""Changed fields kept per diff (the rest are counted in ``diffCut``)."""
MAX_EVENTS_PER_KIND = 20_000
"""The oldest events of a kind beyond this are dropped (counted in ``dropped``)."""
SCHEDULER_LANE = "kube-scheduler"
KUBELET_LANE = "simulated-kubelet"
NODE_LANES = (
    {"id": SCHEDULER_LANE, "title": "kube-scheduler (bindings)"},
    {"id": KUBELET_LANE, "title": "simulated kubelet (KWOK)"},
)
"""Lanes of a plane with simulated nodes (:mod:`ktest.timeline.pod_writers`), shown only when
they have events."""
_SKIPPED_PATHS = ("metadata.managedFields", "metadata.resourceVersion")


def cut(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Event:
    """One thing that happened, on one lane at one time."""

    lane: str
    kind: str
    t: float
    label: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "kind": self.kind,
            "t": round(self.t, 4),
            "label": cut(self.label, 300),
            "detail": self.detail,
        }


@dataclass
class TimelineData:
    """Everything one page shows; :meth:`as_json` is what it embeds."""

    test: str
    started_wall: float
    duration: float = 0.0
    outcome: str = "recorded"
    operators: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    failure: tuple[float, str] | None = None
    truncated: tuple[float, str] | None = None
    problems: list[str] = field(default_factory=list)
    """What could not be recorded (shown on the page and in the report)."""

    def lanes(self) -> list[dict[str, str]]:
        lanes = [{"id": "test", "title": "test"}]
        lanes += [{"id": f"operator:{name}", "title": f"operator {name}"} for name in self.operators]
        lanes += [
            {"id": "apiserver", "title": "API server (writes, watch events)"},
            {"id": "controllers", "title": "controllers (GC, namespace)"},
        ]
        used = {event.lane for event in self.events}
        lanes += [lane for lane in NODE_LANES if lane["id"] in used]
        lanes.append({"id": "faults", "title": "faults"})
        return lanes

    def as_json(self) -> dict[str, Any]:
        from datetime import datetime, timezone

        events = sorted(self.events, key=lambda event: event.t)
        kept, dropped = cap_events(events)
        failure = None
        if self.failure is not None:
            failure = {"t": round(self.failure[0], 4), "message": cut(self.failure[1], 8000)}
        truncated = None
        if self.truncated is not None:
            truncated = {"at": round(self.truncated[0], 4), "reason": self.truncated[1]}
        return {
            "schema": SCHEMA,
            "test": self.test,
            "outcome": self.outcome,
            "started": datetime.fromtimestamp(self.started_wall, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "duration": round(max(self.duration, *(event.t for event in events), 0.0), 4),
            "lanes": self.lanes(),
            "events": [event.as_json() for event in kept],
            "failure": failure,
            "truncated": truncated,
            "problems": self.problems,
            "dropped": dropped,
        }


def cap_events(events: list[Event]) -> tuple[list[Event], dict[str, int]]:
    """Keep at most :data:`MAX_EVENTS_PER_KIND` of each kind (the latest: failures come last)."""
    counts = Counter(event.kind for event in events)
    over = {
        kind: count - MAX_EVENTS_PER_KIND for kind, count in counts.items() if count > MAX_EVENTS_PER_KIND
    }
    if not over:
        return events, {}
    skip = dict(over)
    kept = []
    for event in events:
        if skip.get(event.kind, 0) > 0:
            skip[event.kind] -= 1
            continue
        kept.append(event)
    return kept, over


# -------------------------------------------------------------------- object diffs


def flatten(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``("spec.replicas", 3)`` pairs for every leaf (list items as ``containers[0]``)."""
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if path in _SKIPPED_PATHS:
                continue
            yield from flatten(item, path)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from flatten(item, f"{prefix}[{index}]")
    else:
        yield prefix, value


def shown_value(value: Any) -> str:
    return cut(json.dumps(value, sort_keys=True, default=str))


def object_diff(
    old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> tuple[list[dict[str, Any]], int]:
    """The changed fields between two versions of an object, as rows ``{"path", "old", "new"}``
    (``old`` or ``new`` null where the field is absent), and how many rows were cut."""
    before = dict(flatten(old)) if old else {}
    after = dict(flatten(new)) if new else {}
    rows = [
        {
            "path": path,
            "old": shown_value(before[path]) if path in before else None,
            "new": shown_value(after[path]) if path in after else None,
        }
        for path in sorted(before.keys() | after.keys())
        if path not in before or path not in after or before[path] != after[path]
    ]
    return rows[:MAX_DIFF_ROWS], max(0, len(rows) - MAX_DIFF_ROWS)


# -------------------------------------------------------------------- Secrets


_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def hidden(value: Any, *, base64_text: bool = False) -> str:
    """What a page shows of a Secret's value: its length and a hash (equal values, equal
    hashes: a change still shows), never the value. ``base64_text``: the length decoded."""
    import base64
    import binascii

    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    length = len(text.encode())
    if base64_text:
        with contextlib.suppress(binascii.Error, ValueError):  # not base64: its own length
            length = len(base64.b64decode(text, validate=True))
    return f"(hidden: {length} bytes, sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]})"


def without_secret_values(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Secret with every value of ``data`` and ``stringData`` (and the last-applied copy of
    them kubectl keeps in an annotation) replaced by :func:`hidden`."""
    shown = dict(obj)
    for name, base64_text in (("data", True), ("stringData", False)):
        values = obj.get(name)
        if isinstance(values, Mapping):
            shown[name] = {key: hidden(value, base64_text=base64_text) for key, value in values.items()}
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if isinstance(metadata, Mapping) and isinstance(annotations, Mapping) and _LAST_APPLIED in annotations:
        shown["metadata"] = {
            **metadata,
            "annotations": {**annotations, _LAST_APPLIED: hidden(annotations[_LAST_APPLIED])},
        }
    return shown
