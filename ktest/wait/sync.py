"""``eventually`` and ``consistently`` for ordinary (sync) tests."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypeVar

from tenacity import Retrying

from ktest.wait.run import Attempt, WaitRun

T = TypeVar("T")

Watch = Iterable[Any] | Any | Literal[False] | None


def eventually(
    fn: Callable[[], T],
    *,
    timeout: float | None = None,
    interval: float | None = None,
    watch: Watch = None,
    cluster: Any = None,
    description: str | None = None,
) -> T:
    """Call ``fn`` until it passes; return its value.

    It passes when it returns a truthy value, or, for an assertion-style check (a
    ``def`` with no ``return value``), when it runs to its end.  "Not yet", retried:
    a falsy result (``False``, ``None``, empty), ``AssertionError``, a lookup error
    (``KeyError``, ``IndexError``, ``None`` used as an object), API errors 404 (the
    object may not exist yet), 409, 429 and 5xx, and connection errors; any other
    exception propagates at once (see :mod:`ktest.wait.checks`).
    Between attempts it sleeps ``interval`` seconds, waking early when an object the
    check read through a ``Cluster`` (or one of ``watch=[...]`` on ``cluster=``)
    changes; ``watch=False`` turns that off.  After ``timeout`` seconds it raises
    ``AssertionError`` with the attempts, the last failure and the last value.
    Unset settings come from :func:`ktest.wait.current_defaults`.
    """
    __tracebackhide__ = True
    run = WaitRun("eventually", fn, window=timeout, interval=interval, watch=watch,
                  cluster=cluster, description=description)
    attempt: Attempt = Retrying(sleep=run.sleep, **run.retrying_options())(_evaluate, run)
    run.raise_unless_passed(attempt)
    return attempt.value


def consistently(
    fn: Callable[[], Any],
    *,
    duration: float | None = None,
    interval: float | None = None,
    watch: Watch = None,
    cluster: Any = None,
    description: str | None = None,
) -> None:
    """Call ``fn`` for ``duration`` seconds and require it to pass every time.

    Passing is judged as for :func:`eventually`: a failing ``assert``, a falsy result, a
    lookup error or a 404 (the object is gone) breaks it at once, with an
    ``AssertionError`` saying what changed, on which attempt and when.  Transient API
    errors (409, 429, 5xx, connection errors) are evaluated again, as long as some
    attempt passes.  Watched objects (as for :func:`eventually`) are re-checked as
    soon as they change, so a short-lived violation between two polls is caught too.
    """
    __tracebackhide__ = True
    run = WaitRun("consistently", fn, window=duration, interval=interval, watch=watch,
                  cluster=cluster, description=description)
    attempt: Attempt = Retrying(sleep=run.sleep, **run.retrying_options())(_evaluate, run)
    run.raise_unless_passed(attempt)


def _evaluate(run: WaitRun) -> Attempt:
    with run.evaluating():
        try:
            value = run.fn()
        except Exception as exc:
            verdict = run.verdict_for(exc)
            if verdict is None:
                raise
            return run.record(error=exc, verdict=verdict)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise TypeError(
            f"{run.kind}({run.description}) got an awaitable from the check; "
            f"use ktest.wait.aio.{run.kind} in async tests"
        )
    return run.record(value=value)
