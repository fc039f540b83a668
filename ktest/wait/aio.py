"""``eventually`` and ``consistently`` for ``async def`` tests.

The check may be a plain function or a coroutine function.  Sleeps are asyncio
sleeps (the event loop, and an operator running on it, keep going) and end early
on the same watch events as the sync versions.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tenacity import AsyncRetrying

from ktest.wait.run import Attempt, WaitRun

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ktest.wait.run import WaitOptions

T = TypeVar("T")


async def eventually(
    fn: Callable[[], T | Awaitable[T]], *, timeout: float | None = None, **options: Unpack[WaitOptions]
) -> T:
    """Async :func:`ktest.wait.eventually`: await ``fn`` until it passes; return its value."""
    __tracebackhide__ = True
    return await _wait(WaitRun("eventually", fn, window=timeout, **options))


async def consistently(
    fn: Callable[[], Any], *, duration: float | None = None, **options: Unpack[WaitOptions]
) -> None:
    """Async :func:`ktest.wait.consistently`: ``fn`` must pass for ``duration`` seconds."""
    __tracebackhide__ = True
    await _wait(WaitRun("consistently", fn, window=duration, **options))


async def _wait(run: WaitRun) -> Any:
    """Await the check under tenacity until ``run`` is decided; the passing attempt's value."""
    __tracebackhide__ = True
    decisive: Attempt = await AsyncRetrying(sleep=run.async_sleep, **run.retrying_options())(_evaluate, run)
    return run.passing_value(decisive)


async def _evaluate(run: WaitRun) -> Attempt:
    with run.evaluating():
        try:
            value = run.check()
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            if (verdict := run.verdict_for(exc)) is None:
                raise
            return run.record(error=exc, verdict=verdict)
    return run.record(value=value)
