"""The "API calls" section of a failure report: the calls that matter first.

Writes and errors (status 400 and up, or no answer) come first, then watches, each with its
object and status; a client's start-up discovery (GETs of ``/api``, ``/apis``,
``/apis/<group>/<version>``) is one line with a count; the other calls (lists, reads) last.
Every call, in order, stays in the test's timeline.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from ktest.proxy.traffic import TAIL_CALLS, Call, Traffic

_DISCOVERY = re.compile(r"^/(api|apis)(/[^/]+){0,2}/?$|^/version/?$")


def is_discovery(call: Call) -> bool:
    """A GET of the discovery documents a client reads on start-up (``/api``, ``/apis/apps/v1``)."""
    request = call.request
    return request.verb == "get" and not request.resource and bool(_DISCOVERY.match(request.path))


def is_failure(call: Call) -> bool:
    return call.status is None or call.status >= 400


def describe_calls(traffic: Traffic, *, since: int = 0, limit: int = TAIL_CALLS) -> str:
    """The section's text for the calls recorded since mark ``since``."""
    calls = traffic.calls(since=since)
    if not calls:
        return traffic.describe(since=since)  # "(no API calls recorded)", with the proxy's notes
    first = [call for call in calls if call.is_write or (is_failure(call) and not call.request.is_watch)]
    watches = [call for call in calls if call.request.is_watch and call not in first]
    discovery = [call for call in calls if is_discovery(call) and not is_failure(call)]
    shown = {id(call) for call in (*first, *watches, *discovery)}
    others = [call for call in calls if id(call) not in shown]
    lines = [
        f"{len(calls)} calls: {len(first)} writes and errors, {len(watches)} watches, "
        f"{len(discovery)} discovery GETs, {len(others)} other (every call, in order: the timeline)"
    ]
    lines += _group("writes and errors", first, limit)
    lines += _group("watches", watches, limit)
    if discovery:
        answers = Counter(call.status for call in discovery)
        statuses = ", ".join(f"{status} x{count}" for status, count in answers.items())
        lines.append(
            f"start-up discovery: {len(discovery)} GETs of /api, /apis, /apis/<group>/<version> "
            f"(+{discovery[0].at:.2f}s to +{discovery[-1].at:.2f}s; {statuses})"
        )
    lines += _group("other calls", others, limit, counts=True)
    notes = [(at, text) for at, text in traffic.notes() if at >= calls[0].at]
    if notes:
        lines += ["meanwhile:", *(f"  +{at:.2f}s ---- {text} ----" for at, text in notes[-limit:])]
    return "\n".join(lines)


def _group(title: str, calls: list[Call], limit: int, *, counts: bool = False) -> list[str]:
    if not calls:
        return []
    head = f"{title} ({len(calls)}"
    head += f"; {_counts(calls)})" if counts else ")"
    if len(calls) > limit:
        head += f", the last {limit}"
    return [f"{head}:", *("  " + call.describe() for call in calls[-limit:])]


def _counts(calls: Iterable[Call]) -> str:
    found = Counter(f"{call.verb} {call.request.resource or call.request.path}" for call in calls)
    return ", ".join(f"{key} x{count}" for key, count in found.most_common(5)) + (
        ", ..." if len(found) > 5 else ""
    )
