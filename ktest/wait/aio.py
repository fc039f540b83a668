"""``eventually`` and ``consistently`` for ``async def`` tests.

The check may be a plain function or a coroutine function.  Sleeps are asyncio
sleeps (the event loop, and an operator running on it, keep going) and end early
on the same watch events as the sync versions.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tenacity import AsyncRetrying

from ktest.wait.run import Attempt, WaitRun
from ktest.wait.sync import Watch

T = TypeVar("T")


async def eventually(
    fn: Callable[[], T | Awaitable[T]],
    *,
    timeout: float | None = None,
    interval: float | None = None,
    watch: Watch = None,
    cluster: Any = None,
    description: str | None = None,
) -> T:
    """Async :func:`ktest.wait.eventually`: await ``fn`` until it passes; return its value."""
    __tracebackhide__ = True
    run = WaitRun("eventually", fn, window=timeout, interval=interval, watch=watch,
                  cluster=cluster, description=description)
    retrying = AsyncRetrying(sleep=run.async_sleep, **run.retrying_options())
    attempt: Attempt = await retrying(_evaluate, run)
    run.raise_unless_passed(attempt)
    return attempt.value


async def consistently(
    fn: Callable[[], Any],
    *,
    duration: float | None = None,
    interval: float | None = None,
    watch: Watch = None,
    cluster: Any = None,
    description: str | None = None,
) -> None:
    """Async :func:`ktest.wait.consistently`: ``fn`` must pass for ``duration`` seconds."""
    __tracebackhide__ = True
    run = WaitRun("consistently", fn, window=duration, interval=interval, watch=watch,
                  cluster=cluster, description=description)
    retrying = AsyncRetrying(sleep=run.async_sleep, **run.retrying_options())
    attempt: Attempt = await retrying(_evaluate, run)
    run.raise_unless_passed(attempt)


async def _evaluate(run: WaitRun) -> Attempt:
    with run.evaluating():
        try:
            value = run.fn()
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            verdict = run.verdict_for(exc)
            if verdict is None:
                raise
            return run.record(error=exc, verdict=verdict)
    return run.record(value=value)
