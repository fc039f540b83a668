"""``eventually`` and ``consistently`` for ordinary (sync) tests."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tenacity import Retrying

from ktest.wait.run import Attempt, WaitRun, Watch

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ktest.wait.run import WaitOptions

__all__ = ["Watch", "consistently", "eventually"]

T = TypeVar("T")


def eventually(fn: Callable[[], T], *, timeout: float | None = None, **options: Unpack[WaitOptions]) -> T:
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
    return _wait(WaitRun("eventually", fn, window=timeout, **options))


def consistently(
    fn: Callable[[], Any], *, duration: float | None = None, **options: Unpack[WaitOptions]
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
    _wait(WaitRun("consistently", fn, window=duration, **options))


def _wait(run: WaitRun) -> Any:
    """Run the check under tenacity until ``run`` is decided; the passing attempt's value."""
    __tracebackhide__ = True
    decisive: Attempt = Retrying(sleep=run.sleep, **run.retrying_options())(_evaluate, run)
    return run.passing_value(decisive)


def _evaluate(run: WaitRun) -> Attempt:
    with run.evaluating():
        try:
            value = run.check()
        except Exception as exc:
            if (verdict := run.verdict_for(exc)) is None:
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
