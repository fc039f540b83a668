"""Assertions on what the operator asks of the API server, read from its traffic record.

They need the operator to run behind ktest's proxy (the default): each reads
``op.traffic`` and, where it needs a fault, injects it with ``op.faults``.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ktest.assertions.objects import duration_or_default, failure, timeout_or_default
from ktest.cluster.refs import as_ref
from ktest.proxy.rules import Rule, gone, server_error, throttle
from ktest.wait.report import plural

if TYPE_CHECKING:
    from ktest.cluster.refs import RefLike
    from ktest.operators.operator import OperatorHandle
    from ktest.proxy.traffic import Call, Traffic

RULE_NO_HOT_LOOP = (
    "a controller that has converged sends no writes until something changes; a write on every "
    "reconcile (even one the API server finds unchanged) is a hot loop that loads the API server "
    "and, when it changes the object, triggers the next reconcile"
)
RULE_RECOVERS = (
    "a controller survives API server trouble: it re-opens dropped watches (resuming from its "
    "last resourceVersion, or listing again), retries refused writes with back-off, and converges "
    "once the trouble is over"
)
RULE_BACKS_OFF = (
    "after 429 Too Many Requests or a 5xx a client waits before it retries: at least the "
    "Retry-After the server sent, and longer after each failure; retrying at once multiplies "
    "the load on a server that is already overloaded"
)
RULE_RELIST = (
    "after 410 Gone (the resourceVersion it watched from is too old) a client must list again, "
    "then watch from the list's resourceVersion; watching on without a list misses every change "
    "(deletions included) made while it was away"
)
MAX_CALLS_SHOWN = 12
_POLL = 0.05
_RETRY_AFTER_SLACK = 0.9
_PASS_SLACK = 0.05
"""Seconds before a refused request that its reconcile pass may have started (events then count)."""

T = TypeVar("T")


def calls_text(calls: Sequence[Call]) -> list[str]:
    """The last calls, one line each, for a failure message."""
    shown = list(calls)[-MAX_CALLS_SHOWN:]
    lines = [call.describe() for call in shown]
    if len(calls) > len(shown):
        lines.insert(0, f"... {len(calls) - len(shown)} earlier calls")
    return lines or ["(no calls)"]


def poll(seconds: float, read: Callable[[], T], done: Callable[[T], object] = bool) -> T:
    """``read()`` every 50 ms until ``done`` says its value will do, or for ``seconds`` at most;
    the last value read (what the traffic record says, not the cluster: no watch to wake on)."""
    deadline = time.monotonic() + seconds
    while not done(value := read()) and time.monotonic() < deadline:
        time.sleep(_POLL)
    return value


def _object_filters(operator: OperatorHandle, obj: RefLike | None) -> dict[str, Any]:
    if obj is None:
        return {}
    ref = as_ref(obj)
    info = operator.cluster.info(ref.api_version, ref.kind)
    namespace = ref.namespace if info.namespaced else None
    return {"resource": info.plural, "namespace": namespace, "name": ref.name}


# -------------------------------------------------------------------- hot loops


@dataclass(frozen=True)
class WriteCounts:
    """What :func:`assert_no_hot_loop` counted: writes per object in the window."""

    window: float
    per_object: dict[str, int]


def assert_no_hot_loop(
    operator: OperatorHandle,
    obj: RefLike | None = None,
    *,
    window: float | None = None,
    max_writes: int = 2,
) -> WriteCounts:
    """For ``window`` seconds (default: the consistently duration) the operator writes no object
    (or only ``obj``) more than ``max_writes`` times, counting every write it sends.
    Events it creates (``v1`` and ``events.k8s.io``) are not writes of an object and are
    not counted, unless ``obj`` names one.

    Call it once the operator should have converged. On failure the message names the
    object written most, how often and how fast, and lists the writes.
    """
    __tracebackhide__ = True
    seconds = duration_or_default(window, "window")
    traffic = operator.traffic
    filters = _object_filters(operator, obj)
    mark = traffic.mark()
    time.sleep(seconds)
    writes = traffic.writes(since=mark, **filters)
    per_object: dict[str, list[Call]] = {}
    for call in writes:
        request = call.request
        if obj is None and _is_event(request):
            continue  # reporting what it did is not rewriting an object
        key = request.target()
        if request.subresource:
            key = key.replace(f" ({request.subresource})", "")
        per_object.setdefault(key, []).append(call)
    counts = {key: len(calls) for key, calls in per_object.items()}
    busy = {key: calls for key, calls in per_object.items() if len(calls) > max_writes}
    if busy:
        worst, calls = max(busy.items(), key=lambda item: len(item[1]))
        verbs = Counter(call.verb + (f" ({call.subresource})" if call.subresource else "") for call in calls)
        observed = [
            f"{key}: {plural(len(c), 'write')}" for key, c in sorted(busy.items(), key=lambda i: -len(i[1]))
        ]
        observed.append(f"writes of {worst}: " + ", ".join(f"{v} x{n}" for v, n in verbs.items()))
        observed += calls_text(calls)
        raise AssertionError(failure(
            f"operator {operator.name!r} is in a hot loop: it wrote {worst} {len(calls)} times in a "
            f"{seconds:g}s window ({len(calls) / seconds:.1f}/s; at most {max_writes} allowed)",
            RULE_NO_HOT_LOOP,
            observed,
        ))
    return WriteCounts(seconds, counts)


def _is_event(request: Any) -> bool:
    return request.resource == "events" and (request.group or "") in ("", "events.k8s.io")


# -------------------------------------------------------------------- recovery


@dataclass(frozen=True)
class Recovery:
    """What :func:`assert_recovers` saw: the faults applied and how long convergence took."""

    faults: str
    converged_after: float


def assert_recovers(
    operator: OperatorHandle,
    fault: Rule | Sequence[Rule],
    then: Callable[[], Any],
    *,
    action: Callable[[], Any] | None = None,
    duration: float = 1.0,
    timeout: float | None = None,
) -> Recovery:
    """Inject ``fault`` (one rule or several), run ``action`` (the change the operator must
    handle) while it is active, keep it ``duration`` s (or until counted rules are used up,
    at most ``duration`` s more), end it; then the operator must converge: ``then`` passes
    within ``timeout`` (default: the eventually timeout). ``then`` is a check as ``eventually``
    takes it (in ``ktest.assertions.aio``, an async ``then`` must return a truthy value).

    Beyond ``then``, recovery means: every watch the fault closed is re-opened, and every
    object whose request the fault refused is asked about again. The failure says which
    of these did not happen (the symptom: "never re-opened its watch of webapps", "gave up
    on webapps ns/shop after 409 Conflict").
    """
    __tracebackhide__ = True
    from ktest.wait import eventually

    rules = [fault] if isinstance(fault, Rule) else list(fault)
    limit = timeout_or_default(timeout)
    traffic = operator.traffic
    mark = traffic.mark()
    start = traffic.now()
    with operator.faults.inject(*rules) as injection:
        if action is not None:
            action()
        counted = [state for state in injection.states if state.rule.times is not None]
        poll(duration, lambda: counted and all(state.exhausted for state in counted))
    ended = traffic.now()
    description = injection.describe()
    problems: list[str] = []
    try:
        eventually(then, timeout=limit, description="the operator converged after the fault")
    except AssertionError as error:
        problems.append(f"it did not converge within {limit:g}s after the fault ended:\n"
                        f"{_indent(str(error))}")
    converged = traffic.now() - ended
    gaps = _unrecovered(traffic, mark, start, max(0.0, limit - converged))
    problems = gaps + problems
    if problems:
        symptom = problems[0].splitlines()[0]
        faults = ", ".join(rule.describe() for rule in rules)
        raise AssertionError(failure(
            f"operator {operator.name!r} did not recover from {faults}: {symptom}",
            RULE_RECOVERS,
            [*problems, f"faults: {description}", "its calls since the fault:",
             *calls_text(_calls_during(traffic, mark, start))],
        ))
    return Recovery(description, converged)


def _calls_during(traffic: Traffic, mark: int, start: float) -> list[Call]:
    """The calls made since ``mark``, and those still open at ``start`` (a watch the fault closed)."""
    later = traffic.calls(since=mark)
    seen = {id(call) for call in later}
    earlier = [c for c in traffic.calls() if id(c) not in seen and (c.ended is None or c.ended >= start)]
    return earlier + later


def _unrecovered(traffic: Traffic, mark: int, start: float, wait: float) -> list[str]:
    """Watches closed and never re-opened; objects refused and never asked about again."""
    return poll(wait, lambda: _recovery_gaps(_calls_during(traffic, mark, start)), lambda gaps: not gaps)


def _recovery_gaps(calls: list[Call]) -> list[str]:
    problems = []
    cut_watches = [
        c for c in calls
        if c.verb == "watch" and (c.answered_by_fault or c.closed_by not in (None, "server", "client"))
    ]
    cut_ids = {id(c) for c in cut_watches}
    for resource in sorted({c.resource for c in cut_watches}):
        last = max((c for c in cut_watches if c.resource == resource), key=lambda c: c.ended or c.at)
        last_cut = last.ended or last.at
        # A client may re-open the watch before the proxy has recorded the cut one's end,
        # so a new watch counts from when the cut one started, not from when it ended.
        reopened = [
            c for c in calls
            if c.verb == "watch" and c.resource == resource and id(c) not in cut_ids
            and c.at >= last.at and not c.answered_by_fault
        ]
        if not reopened:
            problems.append(
                f"it never re-established its watch of {resource}: the fault closed it at +{last_cut:.2f}s "
                "and no new watch followed, so it no longer sees changes of "
                f"{resource}"
            )
    refused = [c for c in calls if c.answered_by_fault and c.status not in (None, 200) and c.request.name]
    for key in sorted({c.object_key() for c in refused}, key=str):
        last = max((c for c in refused if c.object_key() == key), key=lambda c: c.at)
        later = [c for c in calls if c.object_key() == key and c.at > last.at]
        if not later:
            resource, namespace, name = key
            where = f"{namespace}/{name}" if namespace else name
            problems.append(
                f"it gave up on {resource} {where} after {last.status} {_reason(last.status)}: no request "
                f"about it since +{last.at:.2f}s (a refused write must be retried)"
            )
    return problems


def _reason(status: int | None) -> str:
    return {409: "Conflict", 410: "Gone", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable"}.get(status or 0, "")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


# -------------------------------------------------------------------- back-off


@dataclass(frozen=True)
class Backoff:
    """The gaps (seconds) between each refused request and the operator's retry; requests that
    followed a watch event about the same object are reactions to a change, not retries, and
    are listed apart."""

    gaps: tuple[float, ...]
    reactions: tuple[str, ...] = ()


def assert_backs_off(
    operator: OperatorHandle,
    on: int = 429,
    *,
    trigger: Callable[[], Any] | None = None,
    resource: str | None = None,
    verb: str | Sequence[str] | None = None,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
    times: int = 2,
    retry_after: float | None = 1.0,
    min_gap: float = 0.1,
    timeout: float | None = None,
) -> Backoff:
    """Answer the operator's next ``times`` matching requests with ``on`` (429, or a 5xx) and
    ``Retry-After: retry_after``; ``trigger()`` makes it send them. Each retry (the next
    matching request) must come at least ``retry_after`` s (or, with ``retry_after=None``,
    ``min_gap`` s) after the refusal. A request that follows a watch event about an object of
    the same namespace and name (the operator reacting to a change, e.g. another writer's)
    is not judged as a retry.

    The official Python client (urllib3) itself retries 429 and 503 answers that carry
    Retry-After, honouring it (up to three times): an operator built on it passes those
    whatever its own retry logic; 500 (or ``retry_after=None``) tests the operator's.
    """
    __tracebackhide__ = True
    rule: Rule
    if on == 429:
        rule = throttle(resource, retry_after=retry_after or 0, verb=verb, namespace=namespace, name=name,
                        subresource=subresource, times=times)
    else:
        rule = server_error(on, resource, retry_after=retry_after, verb=verb, namespace=namespace, name=name,
                            subresource=subresource, times=times)
    limit = timeout_or_default(timeout)
    traffic = operator.traffic
    mark = traffic.mark()
    with operator.faults.inject(rule) as injection:
        state = injection.states[0]
        if trigger is not None:
            trigger()
        refused_all = poll(limit + times * (retry_after or 0), lambda: state.exhausted)
    matching = poll(  # up to the retry of the last refusal
        limit,
        lambda: [c for c in traffic.calls(since=mark) if rule.matches(c.request, state.plurals)],
        lambda calls: calls and not calls[-1].answered_by_fault,
    )
    wanted = retry_after if retry_after else min_gap
    gaps: list[float] = []
    tight: list[str] = []
    reactions: list[str] = []
    for refused, retry in itertools.pairwise(matching):
        if not refused.answered_by_fault:
            continue
        refused_at = refused.ended or refused.at
        gap = retry.at - refused_at
        if refused.name is not None:
            # An event that arrived while the refused pass ran, or since, makes the operator act again
            # at once (a work queue re-queues a key that changed while it was being processed).
            events = traffic.events_about(
                refused.namespace, refused.name, after=refused.at - _PASS_SLACK, before=retry.at
            )
            if events:  # the operator reacting to a change is not a retry
                reactions.append(f"{gap:.3f}s after {refused.describe()}: followed a watch event of "
                                 f"{events[0][1]} about it")
                continue
        gaps.append(gap)
        if gap < wanted * _RETRY_AFTER_SLACK:
            tight.append(f"{gap:.3f}s after {refused.describe()}")
    label = f"{on} {_reason(on)}" + (f" (Retry-After: {retry_after:g})" if retry_after else "")
    if not state.fired:
        raise AssertionError(failure(
            f"operator {operator.name!r} sent no request matching {rule.describe()} within {limit:g}s, "
            "so its back-off could not be observed",
            RULE_BACKS_OFF,
            ["check the rule's resource/verb/name, and that trigger() makes the operator write",
             f"its calls: {traffic.summary(since=mark)}"],
        ))
    if tight:
        raise AssertionError(failure(
            f"operator {operator.name!r} retried in a tight loop after {label}: "
            f"{len(tight)} of {len(gaps)} retries came sooner than {wanted:g}s",
            RULE_BACKS_OFF,
            [*tight, f"gaps: {', '.join(f'{g:.3f}s' for g in gaps)}", "the matching calls:",
             *calls_text(matching),
             *(["not judged (reactions to watch events):", *reactions] if reactions else [])],
        ))
    if not refused_all or not matching or matching[-1].answered_by_fault:
        raise AssertionError(failure(
            f"operator {operator.name!r} stopped retrying after {label}: after {state.fired} refusals "
            f"it sent no further matching request within {limit:g}s",
            RULE_BACKS_OFF,
            ["the matching calls:", *calls_text(matching)],
        ))
    return Backoff(tuple(gaps), tuple(reactions))


# -------------------------------------------------------------------- 410 Gone


@dataclass(frozen=True)
class Relist:
    """The watch answered 410 and the list that followed it."""

    gone: Call
    relist: Call


def assert_relists_after_410(
    operator: OperatorHandle, resource: str, *, namespace: str | None = None, timeout: float | None = None
) -> Relist:
    """Close the operator's watches of ``resource`` and answer its next watch with ``410 Gone``;
    it must list ``resource`` again (then watch again) within ``timeout``. A watch that streams
    the current state first (``sendInitialEvents=true``, client-go's watch list) counts as a list."""
    __tracebackhide__ = True
    limit = timeout_or_default(timeout)
    traffic = operator.traffic
    mark = traffic.mark()
    rule = gone(resource, namespace=namespace)
    with operator.faults.inject(rule, warn_unused=False) as injection:
        state = injection.states[0]
        closed = state.matched  # the open watches the rule ended when injected
        poll(limit, lambda: state.exhausted)
    plurals = state.plurals
    gone_calls = [
        c for c in traffic.calls(verb="watch", since=mark)
        if c.answered_by_fault and (plurals is None or c.resource in plurals)
    ]
    if not gone_calls:
        watches = traffic.calls(verb="watch", since=mark)
        earlier = [c for c in traffic.calls(verb="watch") if plurals is None or c.resource in plurals]
        if closed:
            what = (f"never re-established its watch of {resource} after ktest closed it (so it never got "
                    f"the 410 Gone either) within {limit:g}s")
        elif earlier:
            last = earlier[-1]
            what = (f"had no open watch of {resource} to answer with 410 Gone: it stopped watching "
                    f"{resource} earlier (its last watch ended at +{last.ended or last.at:.2f}s) and never "
                    f"watched again within {limit:g}s")
        else:
            what = f"never watched {resource} (within {limit:g}s): there was no watch to answer with 410 Gone"
        raise AssertionError(failure(
            f"operator {operator.name!r} {what}",
            RULE_RELIST,
            ["its watches since:", *calls_text(watches),
             *(["its last watch before:", earlier[-1].describe()] if earlier and not closed else []),
             f"its calls: {traffic.summary(since=mark)}"],
        ))
    answered = gone_calls[0]

    def is_list(call: Call) -> bool:
        return call.request.lists and call.status == 200 and not call.answered_by_fault

    after = poll(
        limit,
        lambda: [c for c in traffic.calls(since=mark)
                 if c.at > answered.at and (plurals is None or c.resource in plurals)],
        lambda calls: any(is_list(c) for c in calls),
    )
    lists = [c for c in after if is_list(c)]
    if not lists:
        rewatched = [c for c in after if c.verb == "watch" and not c.request.lists]
        how = (
            f"it watched again {plural(len(rewatched), 'time')} without listing "
            f"(resourceVersion {', '.join(repr(c.request.resource_version or '') for c in rewatched[:3])})"
            if rewatched else "it sent nothing about them at all"
        )
        raise AssertionError(failure(
            f"operator {operator.name!r} did not re-list {resource} after its watch got 410 Gone: {how}",
            RULE_RELIST,
            [f"the 410: {answered.describe()}", f"its calls of {resource} since:",
             *calls_text(after)],
        ))
    return Relist(answered, lists[0])
