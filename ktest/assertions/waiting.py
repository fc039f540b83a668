"""``eventually``/``consistently`` with the assertion's own explanation in front.

The retry loop, its defaults and its watch-driven wake-up are ``ktest.wait``'s;
these two wrappers only turn its timing report into the last part of a message
that starts with what is wrong and the Kubernetes rule behind it.

Checks are passed as ``functools.partial`` objects: ``ktest.wait`` shows the
variables of a plain function's frame as "values the check saw", which for these
closures would be whole objects and internals; every assertion states what it
observed in its own message instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ktest.wait import consistently, eventually

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster
    from ktest.cluster.refs import ObjectRef

T = TypeVar("T")

Explain = Callable[[str], str]
"""Builds the whole failure message from the wait report (timings, attempts, last failure)."""


class Vanished(Exception):
    """The object went away: a definite failure, so not retried; the assertion catches it."""


def until(
    check: Callable[[], T], *, timeout: float, description: str, explain: Explain, users_check: bool = False
) -> T:
    """``eventually(check)``; on timeout an AssertionError whose text is ``explain(report)``.

    ``users_check``: the check is the test's own (``converged=``), so the report shows what it
    saw and compared, as ``eventually`` does for it."""
    __tracebackhide__ = True
    try:
        own_check = check if users_check else functools.partial(check)
        return eventually(own_check, timeout=timeout, description=description)
    except AssertionError as error:
        raise AssertionError(explain(str(error))) from None


def until_read(
    cluster: Cluster,
    ref: ObjectRef,
    check: Callable[[dict[str, Any]], T],
    *,
    timeout: float,
    description: str,
    explain: Callable[[str, dict[str, Any] | None], str],
) -> T:
    """``until(check(cluster.get(ref)))``: the check judges the object as read on each attempt;
    ``explain(report, seen)`` also gets the object last read (None: it was never read)."""
    __tracebackhide__ = True
    last: list[dict[str, Any]] = []

    def read_and_check() -> T:
        last[:] = [cluster.get(ref)]
        return check(last[0])

    return until(
        read_and_check,
        timeout=timeout,
        description=description,
        explain=lambda report: explain(report, last[0] if last else None),
    )


def throughout(check: Callable[[], Any], *, duration: float, description: str, explain: Explain) -> None:
    """``consistently(check)``; when it breaks, an AssertionError whose text is ``explain(report)``."""
    __tracebackhide__ = True
    try:
        consistently(functools.partial(check), duration=duration, description=description)
    except AssertionError as error:
        raise AssertionError(explain(str(error))) from None
