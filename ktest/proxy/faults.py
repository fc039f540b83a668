"""Faults while they are injected: which rules are active, what each request gets.

The proxy asks :class:`FaultSet` about every request and tells it about every watch it streams
(so ``close_watches`` and ``gone`` can end them). :class:`Faults` is the test's side: rules of
``with op.faults.inject(rule):`` stack (the first that answers wins, latencies add up) and end
with the block; one that matched nothing is reported (``UnusedFaultRuleWarning``): likely a typo.
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ktest.proxy.api_request import ApiRequest
from ktest.proxy.http1 import shutdown
from ktest.proxy.rules import FaultRuleError, Rule, RuleState

if TYPE_CHECKING:
    from ktest.proxy.traffic import Call, Traffic


class UnusedFaultRuleWarning(UserWarning):
    """A fault rule matched no request while it was injected."""


@dataclass(frozen=True)
class Decision:
    """What the proxy does with one request: wait ``delay`` s, then forward it (``answer`` None),
    answer it (``"status"``, ``"gone"``) or reset the connection (``"reset"``)."""

    label: str
    delay: float = 0.0
    answer: str | None = None
    status: int | None = None
    reason: str = ""
    retry_after: float | None = None


class WatchStream:
    """An open watch being forwarded; :meth:`cut` ends it from another thread."""

    def __init__(self, call: Call, client_gone: Callable[[], bool]) -> None:
        self.call = call
        self.request = call.request
        self._upstream: ssl.SSLSocket | None = None
        # Whether the operator closed its end (a watch it abandoned): the forwarding thread only
        # notices when the next event arrives, which on a quiet watch may be never.
        self.client_gone = client_gone
        self.cut_by: str | None = None

    def attach(self, upstream: ssl.SSLSocket) -> None:
        """The API server connection the watch is sent on (registered before it is answered, so
        a watch in flight is closed too)."""
        self._upstream = upstream
        if self.cut_by is not None:
            shutdown(upstream)

    def cut(self, reason: str) -> None:
        if self.cut_by is None:
            self.cut_by = reason
            shutdown(self._upstream)


class FaultSet:
    """The active rules of one proxy and the watch streams it has open."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[RuleState] = []
        self._watches: list[WatchStream] = []

    def decide(self, request: ApiRequest) -> Decision | None:
        if not self._rules:  # the common case, no lock needed: a rule added now applies to the next request
            return None
        delay = 0.0
        labels: list[str] = []
        with self._lock:
            states = list(self._rules)
        for state in states:
            rule = state.rule
            if rule.action == "close-watches" or not rule.matches(request, state.plurals):
                continue
            if rule.action == "gone" and not request.is_watch:
                continue
            with self._lock:
                acts = state.take()
            if not acts:
                continue
            labels.append(rule.describe())
            if rule.action == "latency":
                delay += rule.delay
                continue
            answer = rule.action  # what is left answers: "status", "gone" or "reset"
            return Decision(" + ".join(labels), delay, answer, rule.status, rule.reason, rule.retry_after)
        return Decision(" + ".join(labels), delay) if labels else None

    # ------------------------------------------------------------ watches

    def watch_opened(self, watch: WatchStream) -> None:
        with self._lock:
            self._watches.append(watch)

    def open_watches(self) -> list[WatchStream]:
        with self._lock:
            return list(self._watches)

    def watch_closed(self, watch: WatchStream) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._watches.remove(watch)

    def cut_watches(self, state: RuleState) -> int:
        """End the open watches ``state``'s rule matches (within its ``times``); how many."""
        with self._lock:
            watches = [
                w for w in self._watches if w.cut_by is None and state.rule.matches(w.request, state.plurals)
            ]
        cut = 0
        for watch in watches:
            with self._lock:
                if state.rule.action == "close-watches":
                    if not state.take():
                        continue
                else:
                    state.matched += 1
            watch.cut(state.rule.describe())
            cut += 1
        return cut

    # ------------------------------------------------------------ activation

    def add(self, state: RuleState) -> None:
        with self._lock:
            self._rules.append(state)

    def remove(self, state: RuleState) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._rules.remove(state)

    @property
    def active(self) -> list[Rule]:
        with self._lock:
            return [state.rule for state in self._rules]


@dataclass
class Injection:
    """What an ``inject`` block did: per rule, requests matched and faults applied."""

    states: list[RuleState] = field(default_factory=list)

    @property
    def fired(self) -> int:
        return sum(state.fired for state in self.states)

    def describe(self) -> str:
        return "; ".join(
            f"{state.rule.describe()}: matched {state.matched}, acted {state.fired}" for state in self.states
        )


class Faults:
    """Inject fault rules into one operator's API traffic: ``with op.faults.inject(rule, ...):``."""

    def __init__(
        self,
        name: str,
        fault_set: FaultSet,
        traffic: Traffic,
        catalogue: Callable[[bool], Mapping[str, str]],
    ) -> None:
        self.name = name
        self._set = fault_set
        self._traffic = traffic
        self._catalogue = catalogue

    @contextlib.contextmanager
    def inject(self, *rules: Rule, warn_unused: bool = True) -> Iterator[Injection]:
        """Activate ``rules`` for the block. Resources are checked first (``FaultRuleError``
        names the valid ones); at the end of the block a rule that matched nothing is reported
        as ``UnusedFaultRuleWarning``."""
        if not rules:
            raise FaultRuleError(
                "inject() needs at least one rule, e.g. inject(ktest.faults.gone('webapps'))."
            )
        for rule in rules:
            if not isinstance(rule, Rule):
                raise FaultRuleError(
                    f"inject() takes rules made by ktest.faults (close_watches, gone, conflict, throttle, "
                    f"server_error, latency, reset), not {rule!r}."
                )
        injection = Injection([RuleState(rule, self._resolve(rule)) for rule in rules])
        stop = threading.Event()
        timers: list[threading.Thread] = []
        for state in injection.states:
            self._traffic.note(f"fault injected: {state.rule.describe()}")
            self._set.add(state)
            if state.rule.action in ("close-watches", "gone"):
                self._set.cut_watches(state)
            if state.rule.action == "close-watches" and state.rule.every is not None:
                timer = threading.Thread(
                    target=self._every, args=(state, stop), daemon=True, name=f"ktest-faults-{self.name}"
                )
                timer.start()
                timers.append(timer)
        try:
            yield injection
        finally:
            stop.set()
            for state in injection.states:
                self._set.remove(state)
            for timer in timers:
                timer.join(5)
            for state in injection.states:
                self._traffic.note(
                    f"fault ended: {state.rule.describe()} (matched {state.matched}, acted {state.fired})"
                )
            if warn_unused:
                self._report_unused(injection)

    def _resolve(self, rule: Rule) -> frozenset[str] | None:
        if not rule.resources:
            return None
        try:
            return rule.resolved(self._catalogue(False))
        except FaultRuleError:  # a CRD installed since the names were read?
            return rule.resolved(self._catalogue(True))

    def _every(self, state: RuleState, stop: threading.Event) -> None:
        assert state.rule.every is not None
        while not stop.wait(state.rule.every) and not state.exhausted:
            self._set.cut_watches(state)

    def _report_unused(self, injection: Injection) -> None:
        unused = [state for state in injection.states if state.matched == 0]
        if not unused:
            return
        seen = self._traffic.summary(since=0)
        for state in unused:
            warnings.warn(
                UnusedFaultRuleWarning(
                    f"fault rule {state.rule.describe()} matched no request of operator {self.name!r} "
                    f"during its block: a typo in a name, or the operator never made such a request "
                    f"(it made: {seen})."
                ),
                stacklevel=4,
            )
