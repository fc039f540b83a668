"""Assertions for admission and conversion webhooks, checked through the real API server:
a denial (not a webhook that could not be called), defaulting, lossless conversion."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ktest.assertions.changes import round_trip_changes
from ktest.assertions.objects import describe, failure
from ktest.cluster.refs import ObjectRef, RefLike, as_ref
from ktest.errors.api import ApiError
from ktest.wait.match import diff

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster
    from ktest.webhooks import Webhooks

_DENIED = re.compile(r'admission webhook "(?P<name>[^"]+)" denied the request')
_NOT_CALLED = re.compile(r'failed calling webhook "(?P<name>[^"]+)"')


def assert_rejected(
    action: Callable[[], object],
    reason: str | re.Pattern[str] | None = None,
    *,
    status: int | str | None = None,
    webhook: str | None = None,
    cluster: Cluster | None = None,
    obj: RefLike | None = None,
    webhooks: Webhooks | None = None,
) -> ApiError:
    """Run ``action`` (e.g. ``lambda: cluster.create(widget)``): it must be refused by an admission
    webhook's denial whose message contains ``reason`` (text, or a regex searched for).

    ``status``: the HTTP code (422) or the Status reason (``"Invalid"``); ``webhook``: the name of
    the webhook that must have denied it. A request that failed because a webhook could not be
    called (unreachable, timed out) is not a rejection and fails the assertion. With ``cluster``
    and ``obj``, the object must be stored exactly as before (absent, or the same
    resourceVersion). With ``webhooks``, its calls during the action are in the failure message.
    Returns the API error.
    """
    __tracebackhide__ = True
    target = describe(obj) if obj is not None else "the request"
    before = _stored_version(cluster, obj)
    mark = webhooks.calls.mark() if webhooks is not None else 0

    def calls() -> list[str]:
        if webhooks is None:
            return []
        made = webhooks.calls.since(mark)
        return (
            ["webhook calls during the request:"] + [f"  {c.describe()}" for c in made]
            if made
            else [
                "webhook calls during the request: none (does a webhook's rules, namespaceSelector or "
                "objectSelector match this request?)"
            ]
        )

    rule = "an admission webhook refuses an invalid request with its own message, and nothing is stored"
    try:
        action()
    except ApiError as error:
        rejected = error
    else:
        raise AssertionError(failure(f"{target} was not rejected", rule, ["the request succeeded", *calls()]))
    message, status_reason = rejected.message, _status_reason(rejected)
    problems = []
    not_called, denied = _NOT_CALLED.search(message), _DENIED.search(message)
    if not_called and not denied:
        problems.append(
            f"webhook {not_called.group('name')!r} could not be called, so the request failed without a "
            "verdict (failurePolicy Fail): this is not a rejection"
        )
    if webhook is not None and (denied is None or denied.group("name") != webhook):
        by = f"webhook {denied.group('name')!r}" if denied else "no admission webhook"
        problems.append(f"expected a denial by webhook {webhook!r}, got one by {by}")
    if reason is not None:
        found = reason.search(message) if isinstance(reason, re.Pattern) else reason in message
        if not found:
            problems.append(f"the message does not contain {_pattern_text(reason)}")
    if isinstance(status, int) and rejected.status != status:
        problems.append(f"expected HTTP status {status}, got {rejected.status}")
    if isinstance(status, str) and status_reason != status:
        problems.append(f"expected Status reason {status!r}, got {status_reason!r}")
    after = _stored_version(cluster, obj)
    if obj is not None and cluster is not None and after != before:
        problems.append(
            "it was stored although the request was rejected"
            if before is None
            else "the stored object changed although the request was rejected "
            f"(resourceVersion {before} -> {after})"
        )
    if problems:
        observed = [
            *problems,
            f"API error: {rejected.status} {status_reason}: {message}",
            *calls(),
        ]
        raise AssertionError(failure(f"{target} was not rejected as expected", rule, observed))
    return rejected


def assert_defaulted(
    obj: Mapping[str, Any] | RefLike,
    expected: Mapping[str, Any] | str,
    *,
    sent: Mapping[str, Any] | None = None,
    cluster: Cluster | None = None,
) -> dict[str, Any]:
    """``obj`` (the API server's answer to a create, or a reference read through ``cluster``)
    holds the ``expected`` fields (partial match) that a mutating webhook filled in.

    With ``sent`` (what the test submitted), every expected field must be absent from it:
    a value the request carried itself proves nothing about defaulting. Returns the object.
    """
    __tracebackhide__ = True
    current = _resolve(obj, cluster)
    rule = "a mutating (defaulting) webhook fills in the fields a request leaves out"
    problems = []
    if sent is not None and isinstance(expected, Mapping):
        for path in _sent(sent, expected):
            problems.append(f"{path} was in the request itself, so it shows no defaulting")
    differences = diff(current, expected)
    if differences:
        problems += [f"{line} (not filled in as expected)" for line in differences]
    if problems:
        raise AssertionError(failure(f"{describe(current)} was not defaulted as expected", rule, problems))
    return current


def assert_converts(
    cluster: Cluster,
    obj: RefLike,
    to: str,
    expect: Mapping[str, Any] | str | None = None,
) -> dict[str, Any]:
    """Read the stored ``obj`` at version ``to`` (the API server converts, through the CRD's
    conversion webhook): it must hold ``expect`` (partial match). Then write that form back
    and read it at the original version: nothing may be lost or changed (spec, status, other
    fields, labels and annotations). Returns the object at version ``to``.

    The write-back is a real update at version ``to`` (a lossless conversion stores the same
    object again: the API server skips the no-op write).
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    group, _, from_version = ref.api_version.rpartition("/")
    target_version = f"{group}/{to}" if group else to
    original = cluster.get(ref)
    converted = cluster.get(ObjectRef(target_version, ref.kind, ref.name, ref.namespace))
    rule = (
        "converting between served versions (the CRD's conversion webhook, called by the API server) "
        "keeps every field: what one version holds, the other holds too"
    )
    headline = f"{describe(original)} converted to {to}"
    if converted.get("apiVersion") != target_version:
        raise AssertionError(
            failure(f"{headline}: wrong apiVersion", rule, f"got {converted.get('apiVersion')!r}")
        )
    if expect is not None:
        differences = diff(converted, expect)
        if differences:
            raise AssertionError(failure(f"{headline} is not as expected", rule, differences))
    try:
        cluster.update(converted)
    except ApiError as error:
        raise AssertionError(
            failure(f"{headline} could not be written back at {to}", rule, f"the API server refused: {error}")
        ) from None
    back = cluster.get(ref)
    lost = round_trip_changes(original, back)
    if lost:
        observed = [
            f"after {from_version} -> {to} -> {from_version}:",
            *lost,
            f"at {to} its spec was: {converted.get('spec')}",
        ]
        raise AssertionError(failure(f"{describe(original)} did not survive the round trip", rule, observed))
    return converted


# ------------------------------------------------------------------ helpers


def _stored_version(cluster: Cluster | None, obj: RefLike | None) -> str | None:
    if cluster is None or obj is None:
        return None
    stored = cluster.get_or_none(as_ref(obj))
    return None if stored is None else str(stored["metadata"].get("resourceVersion"))


def _status_reason(error: ApiError) -> str:
    import json

    try:
        return str(json.loads(error.body or "{}").get("reason") or error.reason)
    except ValueError:
        return str(error.reason)


def _pattern_text(reason: str | re.Pattern[str]) -> str:
    return f"a match for /{reason.pattern}/" if isinstance(reason, re.Pattern) else repr(reason)


def _resolve(obj: Mapping[str, Any] | RefLike, cluster: Cluster | None) -> dict[str, Any]:
    if isinstance(obj, Mapping) and "metadata" in obj and ("spec" in obj or cluster is None):
        return dict(obj)
    if cluster is None:
        raise TypeError(
            "assert_defaulted: pass the object (the API server's answer) or a reference and cluster="
        )
    return cluster.get(as_ref(obj))


def _sent(sent: Mapping[str, Any], expected: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The leaf paths of ``expected`` that ``sent`` holds too."""
    found = []
    for key, value in expected.items():
        if key not in sent:
            continue
        if isinstance(value, Mapping) and value:
            if isinstance(sent[key], Mapping):
                found += _sent(sent[key], value, f"{prefix}{key}.")
        else:
            found.append(f"{prefix}{key}")
    return found
