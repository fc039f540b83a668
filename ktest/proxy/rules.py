"""Fault rules: which of the operator's requests to answer badly, and how.

A rule matches requests by verb, resource, namespace, name and subresource, and
does one thing to them::

    close_watches("webapps", every=2)          # end open watch streams (now, then every 2 s)
    gone("webapps")                            # the next watch gets 410 Gone (resourceVersion too old)
    conflict("webapps", times=5)               # writes answered 409 Conflict, five times
    throttle("webapps", retry_after=1)         # 429 Too Many Requests with Retry-After
    server_error(503, "deployments")           # 500/503 from the "server"
    latency(0.5, verb="list")                  # every matching request waits 0.5 s first
    reset("services", times=1)                 # the connection is reset, no answer at all

Counted (``times=3``: the first three matching requests) or probabilistic
(``probability=0.2``, drawn from ``random.Random(seed)``; without ``seed`` one is
chosen and shown in the rule's description, so a failing run can be replayed).
Verbs are checked when the rule is made; resources when it is injected (against
what the API server serves).
"""

from __future__ import annotations

import difflib
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypedDict

from ktest.proxy.api_request import READ_VERBS, VERBS, WRITE_VERBS, ApiRequest

VERB_GROUPS: Mapping[str, frozenset[str]] = {
    "read": READ_VERBS,
    "write": WRITE_VERBS,
    "*": frozenset(VERBS),
}

if TYPE_CHECKING:
    from typing_extensions import Unpack


class FaultRuleError(ValueError):
    """A rule that cannot be right: unknown verb or resource, impossible numbers."""


@dataclass(frozen=True)
class Rule:
    """One fault: what it matches and what it does (build it with the functions below)."""

    action: str
    verbs: frozenset[str] | None = None
    resources: tuple[str, ...] | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    status: int | None = None
    reason: str = ""
    retry_after: float | None = None
    delay: float = 0.0
    every: float | None = None
    times: int | None = None
    probability: float | None = None
    seed: int | None = None
    label: str = ""

    def matches(self, request: ApiRequest, plurals: frozenset[str] | None) -> bool:
        """Whether ``request`` is one this rule is about (``plurals``: its resources, resolved).
        Requests that name no resource (discovery, ``/version``, health) are never matched."""
        if not request.resource:
            return False
        if self.verbs is not None and request.verb not in self.verbs:
            return False
        if plurals is not None and request.resource not in plurals:
            return False
        if self.namespace is not None and request.namespace != self.namespace:
            return False
        if self.name is not None and request.name != self.name:
            return False
        return self.subresource is None or (request.subresource or "") == self.subresource

    def describe(self) -> str:
        """``conflict(webapps, verb=patch|update, times=5)``: enough to recognise and replay it."""
        parts = []
        if self.resources:
            parts.append("|".join(self.resources))
        if self.verbs is not None and self.verbs != _DEFAULT_VERBS.get(self.label):
            parts.append(f"verb={'|'.join(sorted(self.verbs))}")
        for key in ("namespace", "name", "subresource"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key}={value}")
        if self.action == "status" and self.label == "server_error":
            parts.insert(0, str(self.status))
        if self.action == "latency":
            parts.insert(0, f"{self.delay:g}s")
        for key, unit in (("retry_after", ""), ("every", "s"), ("times", "")):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key}={value:g}{unit}")
        if self.probability is not None:
            parts.append(f"probability={self.probability:g}, seed={self.seed}")
        return f"{self.label}({', '.join(parts)})"

    def resolved(self, catalogue: Mapping[str, str]) -> frozenset[str] | None:
        """The resource names this rule matches; ``FaultRuleError`` naming the valid ones if a
        name is not served. ``catalogue`` maps every accepted spelling (plural, plural.group,
        Kind, kind) to the plural."""
        if self.resources is None:
            return None
        plurals = set()
        for resource in self.resources:
            plural = catalogue.get(resource) or catalogue.get(resource.lower())
            if plural is None:
                valid = sorted({value for value in catalogue.values()})
                close = difflib.get_close_matches(resource.lower(), valid, n=3)
                hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
                raise FaultRuleError(
                    f"fault rule {self.describe()}: the API server serves no resource {resource!r}.{hint} "
                    f"Give a resource (plural, e.g. 'deployments', or plural.group) or a kind "
                    f"('Deployment'); served: {', '.join(valid)}."
                )
            plurals.add(plural)
        return frozenset(plurals)


_DEFAULT_VERBS: dict[str, frozenset[str]] = {
    "close_watches": frozenset({"watch"}),
    "gone": frozenset({"watch"}),
    "conflict": frozenset({"update", "patch"}),
}


def _verbs(verb: str | Iterable[str] | None, what: str) -> frozenset[str] | None:
    if verb is None:
        return None
    given = [verb] if isinstance(verb, str) else list(verb)
    verbs: set[str] = set()
    for item in given:
        text = str(item).lower()
        if text in VERB_GROUPS:
            verbs |= VERB_GROUPS[text]
        elif text in VERBS:
            verbs.add(text)
        else:
            raise FaultRuleError(
                f"{what}: unknown verb {item!r}; valid verbs: {', '.join(VERBS)} "
                f"(or the groups {', '.join(VERB_GROUPS)})."
            )
    return frozenset(verbs)


def _resources(resource: str | Iterable[str] | None, what: str) -> tuple[str, ...] | None:
    if resource is None:
        return None
    names = (resource,) if isinstance(resource, str) else tuple(resource)
    if not names or any(not isinstance(name, str) or not name.strip() for name in names):
        raise FaultRuleError(f"{what}: resource must be a resource or kind name such as 'webapps', "
                             f"not {resource!r}.")
    return tuple(name.strip() for name in names)


class Target(TypedDict, total=False):
    """Which requests a rule acts on, and how often: what every rule constructor takes beside
    ``resource`` (a resource or kind name, or several). ``verb``: get, list, watch, create,
    update, patch, delete (default: each rule's own). ``namespace``, ``name``, ``subresource``
    (``""``: the object itself). ``times``: act on at most that many requests (None: always).
    ``probability`` (with ``seed`` for a repeatable run): act on that share of them."""

    verb: str | Iterable[str] | None
    namespace: str | None
    name: str | None
    subresource: str | None
    times: int | None
    probability: float | None
    seed: int | None


def _rule(
    label: str, action: str, resource: str | Iterable[str] | None, target: Target, **details: object
) -> Rule:
    what = f"fault rule {label}"
    for key in target:
        if key not in Target.__annotations__:
            near = difflib.get_close_matches(key, list(Target.__annotations__), n=1)
            hint = f" (did you mean {near[0]}=?)" if near else ""
            raise FaultRuleError(f"{what}: no argument {key}={target[key]!r}{hint}; it takes "  # type: ignore[literal-required]
                                 f"{', '.join(Target.__annotations__)}.")
    times, probability, seed = target.get("times"), target.get("probability"), target.get("seed")
    if times is not None and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
        raise FaultRuleError(
            f"{what}: times={times!r} must be a whole number of at least 1 (or None: always)."
        )
    if probability is not None and not (isinstance(probability, (int, float)) and 0 < probability <= 1):
        raise FaultRuleError(f"{what}: probability={probability!r} must be more than 0 and at most 1.")
    if probability is not None and seed is None:
        seed = random.SystemRandom().randrange(1, 2**31)
    verb = target.get("verb")
    verbs = _verbs(verb, what) if verb is not None else _DEFAULT_VERBS.get(label)
    if label in ("close_watches", "gone") and verbs is not None and verbs != {"watch"}:
        raise FaultRuleError(f"{what}: only watches can be closed or answered with 410 Gone; "
                             f"leave verb unset (it is 'watch').")
    rule = Rule(
        action, verbs=verbs, resources=_resources(resource, what), namespace=target.get("namespace"),
        name=target.get("name"), subresource=target.get("subresource"), times=times,
        probability=probability, seed=seed, label=label,
    )
    return replace(rule, **details)  # type: ignore[arg-type]


def _seconds(value: float | None, what: str, name: str, *, positive: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or (
        math.isinf(value) or value < 0 or (positive and value == 0)
    ):
        bound = "more than 0" if positive else "0 or more"
        raise FaultRuleError(
            f"fault rule {what}: {name}={value!r} must be a finite number of seconds, {bound}."
        )


def close_watches(
    resource: str | Iterable[str] | None = None,
    *,
    namespace: str | None = None,
    every: float | None = None,
    times: int | None = None,
) -> Rule:
    """End the operator's open watch streams of ``resource`` when injected, and with ``every``
    again every that many seconds while active (``times``: at most that many streams)."""
    _seconds(every, "close_watches", "every", positive=True)
    return _rule("close_watches", "close-watches", resource, Target(namespace=namespace, times=times),
                 every=every)


def gone(
    resource: str | Iterable[str] | None = None, *, namespace: str | None = None, times: int | None = 1
) -> Rule:
    """End the open watches of ``resource``; answer the next ``times`` watch requests with
    ``410 Gone`` ("too old resource version"), as an ERROR event like the API server does.
    A correct client lists again before it watches again."""
    return _rule("gone", "gone", resource, Target(namespace=namespace, times=times), status=410)


def conflict(resource: str | Iterable[str] | None = None, **target: Unpack[Target]) -> Rule:
    """Answer matching writes (default: update and patch) with ``409 Conflict``, unsent."""
    return _rule("conflict", "status", resource, target, status=409, reason="Conflict")


def throttle(
    resource: str | Iterable[str] | None = None, *, retry_after: float = 1, **target: Unpack[Target]
) -> Rule:
    """Answer matching requests with ``429 Too Many Requests`` and ``Retry-After: retry_after``."""
    _seconds(retry_after, "throttle", "retry_after")
    return _rule("throttle", "status", resource, target, status=429, reason="TooManyRequests",
                 retry_after=retry_after)


def server_error(
    status: int = 500,
    resource: str | Iterable[str] | None = None,
    *,
    retry_after: float | None = None,
    **target: Unpack[Target],
) -> Rule:
    """Answer matching requests with a 5xx (500 InternalError, 503 ServiceUnavailable, ...)."""
    if isinstance(status, bool) or not isinstance(status, int) or not 500 <= status <= 599:
        raise FaultRuleError(
            f"fault rule server_error: status={status!r} must be a 5xx code such as 500 or 503."
        )
    _seconds(retry_after, "server_error", "retry_after")
    reason = {500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}.get(status, "InternalError")
    return _rule("server_error", "status", resource, target, status=status, reason=reason,
                 retry_after=retry_after)


def latency(seconds: float, resource: str | Iterable[str] | None = None, **target: Unpack[Target]) -> Rule:
    """Hold matching requests ``seconds`` before they are forwarded (a slow API server)."""
    _seconds(seconds, "latency", "seconds", positive=True)
    return _rule("latency", "latency", resource, target, delay=seconds)


def reset(resource: str | Iterable[str] | None = None, **target: Unpack[Target]) -> Rule:
    """Reset the connection of matching requests (TCP RST, no answer): a dropped connection."""
    return _rule("reset", "reset", resource, target)


@dataclass
class RuleState:
    """A rule while it is injected: its resolved resources, its random source and its counts."""

    rule: Rule
    plurals: frozenset[str] | None
    matched: int = 0
    """Requests (or open watches) it matched."""
    fired: int = 0
    """Times it acted."""
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.rule.seed)

    @property
    def exhausted(self) -> bool:
        return self.rule.times is not None and self.fired >= self.rule.times

    def take(self) -> bool:
        """Count a matching request; whether the rule acts on it (not under the caller's lock)."""
        self.matched += 1
        if self.exhausted:
            return False
        if self.rule.probability is not None and self.rng.random() >= self.rule.probability:
            return False
        self.fired += 1
        return True
