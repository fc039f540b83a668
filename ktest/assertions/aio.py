"""The assertions for ``async def`` tests (pytest-asyncio, or anyio on asyncio).

Each one runs its sync counterpart in a worker thread (``asyncio.to_thread``,
which carries the caller's context: wait defaults, health checks), so the event
loop, and an operator running on it, keep going while it waits. Callables given
to an assertion (``trigger``, ``break_cleanup``, ``converged``...) may be
coroutine functions: they are run on the caller's event loop.

Cancelling the awaiting task does not interrupt the worker thread: it finishes
its current wait (bounded by the assertion's timeout or window) in the background.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ktest.assertions import conflicts, finalizers, ownership, quiescence, status
from ktest.assertions.conflicts import ConcurrentWriter
from ktest.assertions.finalizers import FinalizerScenario
from ktest.cluster.refs import RefLike

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

P = ParamSpec("P")
T = TypeVar("T")

MaybeAsync = Callable[[], object] | Callable[[], Awaitable[object]]


def _threaded(sync: Callable[P, T]) -> Callable[P, Awaitable[T]]:
    @functools.wraps(sync)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        __tracebackhide__ = True
        return await asyncio.to_thread(sync, *args, **kwargs)

    run.__doc__ = f"Async :func:`{sync.__module__}.{sync.__name__}` (runs it in a worker thread)."
    return run


assert_has_finalizer = _threaded(finalizers.assert_has_finalizer)
assert_deletion_blocked = _threaded(finalizers.assert_deletion_blocked)
assert_gone = _threaded(finalizers.assert_gone)
assert_owned_by = _threaded(ownership.assert_owned_by)
assert_garbage_collected = _threaded(ownership.assert_garbage_collected)
assert_orphaned = _threaded(ownership.assert_orphaned)
assert_status_subresource = _threaded(status.assert_status_subresource)
assert_observed_generation = _threaded(status.assert_observed_generation)
assert_condition = _threaded(status.assert_condition)
assert_quiescent = _threaded(quiescence.assert_quiescent)
stale_copy = _threaded(conflicts.stale_copy)
_survives_concurrent_writes = conflicts.assert_survives_concurrent_writes  # `conflicts` is also a parameter


async def assert_transition_time_stable(
    cluster: Cluster,
    obj: RefLike,
    type: str,
    *,
    duration: float | None = None,
    trigger: MaybeAsync | None = None,
    path: str = "status.conditions",
) -> status.TransitionHistory:
    """Async :func:`ktest.assertions.assert_transition_time_stable`; ``trigger`` may be async."""
    __tracebackhide__ = True
    loop = asyncio.get_running_loop()
    return await asyncio.to_thread(
        status.assert_transition_time_stable, cluster, obj, type, duration=duration,
        trigger=_on_loop(loop, trigger), path=path,
    )


async def assert_conflict_on_stale_update(
    cluster: Cluster,
    stale: dict[str, Any],
    *,
    write: Callable[[dict[str, Any]], object] | Callable[[dict[str, Any]], Awaitable[object]] | None = None,
) -> Any:
    """Async :func:`ktest.assertions.assert_conflict_on_stale_update`; ``write`` may be async."""
    __tracebackhide__ = True
    loop = asyncio.get_running_loop()
    send = None
    if write is not None:
        given = write

        def send(obj: dict[str, Any]) -> object:
            return _run_on(loop, lambda: given(obj))

    return await asyncio.to_thread(conflicts.assert_conflict_on_stale_update, cluster, stale, write=send)


async def assert_survives_concurrent_writes(
    cluster: Cluster,
    obj: RefLike,
    converged: MaybeAsync,
    *,
    duration: float | None = None,
    timeout: float | None = None,
    interval: float = 0.05,
    mode: str = "patch",
    min_writes: int = 1,
    conflicts: int = 3,
    trigger: MaybeAsync | None = None,
) -> ConcurrentWriter:
    """Async :func:`ktest.assertions.assert_survives_concurrent_writes`; ``converged`` and
    ``trigger`` may be async."""
    __tracebackhide__ = True
    loop = asyncio.get_running_loop()
    given = converged

    def check() -> object:
        return _run_on(loop, given)

    return await asyncio.to_thread(
        _survives_concurrent_writes, cluster, obj, check, duration=duration,
        timeout=timeout, interval=interval, mode=mode, min_writes=min_writes, conflicts=conflicts,
        trigger=_on_loop(loop, trigger),
    )


async def finalizer_scenario(
    cluster: Cluster,
    obj: RefLike,
    finalizer: str,
    *,
    break_cleanup: MaybeAsync | None = None,
    fix_cleanup: MaybeAsync | None = None,
    cleanup_failing: AbstractContextManager[Any] | AbstractAsyncContextManager[Any] | None = None,
    blocked_for: float | None = None,
    timeout: float | None = None,
    propagation: str | None = None,
) -> FinalizerScenario:
    """Async :func:`ktest.assertions.finalizer_scenario`: the callables may be async, and
    ``cleanup_failing`` may be an async context manager."""
    __tracebackhide__ = True
    loop = asyncio.get_running_loop()
    if isinstance(cleanup_failing, AbstractAsyncContextManager):
        manager = cleanup_failing
        break_cleanup = manager.__aenter__
        fix_cleanup = functools.partial(manager.__aexit__, None, None, None)
        cleanup_failing = None
    return await asyncio.to_thread(
        finalizers.finalizer_scenario, cluster, obj, finalizer,
        break_cleanup=_on_loop(loop, break_cleanup), fix_cleanup=_on_loop(loop, fix_cleanup),
        cleanup_failing=cleanup_failing, blocked_for=blocked_for, timeout=timeout,
        propagation=propagation,
    )


def _on_loop(loop: asyncio.AbstractEventLoop, fn: MaybeAsync | None) -> Callable[[], object] | None:
    """``fn`` callable from a worker thread: coroutines it returns run on ``loop``."""
    if fn is None:
        return None
    given = fn
    return lambda: _run_on(loop, given)


def _run_on(loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> Any:
    if inspect.iscoroutinefunction(fn):
        return asyncio.run_coroutine_threadsafe(fn(), loop).result()
    value = fn()
    if inspect.isawaitable(value):
        return asyncio.run_coroutine_threadsafe(_await(value), loop).result()
    return value


async def _await(value: Awaitable[T]) -> T:
    return await value


__all__ = [
    "ConcurrentWriter",
    "assert_condition",
    "assert_conflict_on_stale_update",
    "assert_deletion_blocked",
    "assert_garbage_collected",
    "assert_gone",
    "assert_has_finalizer",
    "assert_observed_generation",
    "assert_orphaned",
    "assert_owned_by",
    "assert_quiescent",
    "assert_status_subresource",
    "assert_survives_concurrent_writes",
    "assert_transition_time_stable",
    "finalizer_scenario",
    "stale_copy",
]
