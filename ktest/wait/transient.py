"""Which exceptions raised by a check mean "not yet, try again" rather than "broken".

Rule: ``AssertionError`` and lookup errors (a missing key or index, ``None`` used
as an object; see :mod:`ktest.wait.checks`) are a failed check.  API errors 409 (conflict), 429
(throttled) and 5xx, and connection errors, are transient: the check is evaluated
again.  404 is transient only while waiting for something to appear
(``eventually``); in ``consistently`` it means the object is gone, a failed check.
Anything else (a typo, a 403, a 422, a bug in the check) fails at once.
A ``KtestError`` counts as the API or connection error that caused it, if any.
"""

from __future__ import annotations

import json
from enum import Enum

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

from ktest.errors import KtestError
from ktest.wait.checks import is_missing

TRANSIENT_STATUSES = frozenset({409, 429})


class Verdict(Enum):
    """How one evaluation of a check ended."""

    PASSED = "passed"
    FAILED = "failed"
    TRANSIENT = "transient"


def classify(exc: BaseException, *, waiting_for_appearance: bool) -> Verdict | None:
    """The verdict for an exception raised by a check; None means "do not retry: re-raise"."""
    if isinstance(exc, AssertionError) or is_missing(exc):
        return Verdict.FAILED
    cause = _api_or_connection_cause(exc)
    if cause is None:
        return None
    if not isinstance(cause, ApiException):
        return Verdict.TRANSIENT
    status = cause.status if isinstance(cause.status, int) else None
    if status == 404:
        return Verdict.TRANSIENT if waiting_for_appearance else Verdict.FAILED
    if status is not None and (status in TRANSIENT_STATUSES or 500 <= status <= 599):
        return Verdict.TRANSIENT
    return None


def _api_or_connection_cause(exc: BaseException) -> BaseException | None:
    current: BaseException | None = exc
    for _ in range(8):
        if isinstance(current, (ApiException, ConnectionError, TimeoutError, urllib3.exceptions.HTTPError)):
            return current
        if not isinstance(current, KtestError):
            return None
        current = current.__cause__
    return None


def describe(exc: BaseException) -> str:
    """One readable line (or the assertion's own lines) for an exception."""
    if isinstance(exc, ApiException):
        return f"{type(exc).__name__}: {exc.status} {exc.reason}{_api_message(exc)}"
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def _api_message(exc: ApiException) -> str:
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return ""
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        message = None
    return f": {message}" if message else f": {str(body)[:300]}"
