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
import importlib
import inspect
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ktest.assertions import finalizers
from ktest.assertions.conflicts import ConcurrentWriter as ConcurrentWriter
from ktest.public_api import ASSERTIONS, assertion_module

if TYPE_CHECKING:
    from ktest.assertions.finalizers import FinalizerScenario
    from ktest.cluster.cluster import Cluster
    from ktest.cluster.refs import RefLike

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _threaded(sync: Callable[_P, _T], *, callbacks: tuple[str, ...] = ()) -> Callable[_P, Awaitable[_T]]:
    """The async form of ``sync``: run in a worker thread; the arguments named in ``callbacks``
    may be coroutine functions, run on the caller's event loop when ``sync`` calls them."""
    signature = inspect.signature(sync)

    @functools.wraps(sync)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        __tracebackhide__ = True
        if callbacks:
            loop = asyncio.get_running_loop()
            bound = signature.bind(*args, **kwargs)
            for name in callbacks:
                if bound.arguments.get(name) is not None:
                    bound.arguments[name] = _on_loop(loop, bound.arguments[name])
            return await asyncio.to_thread(sync, *bound.args, **bound.kwargs)
        return await asyncio.to_thread(sync, *args, **kwargs)

    may_be_async = f"; {', '.join(f'``{name}``' for name in callbacks)} may be async" if callbacks else ""
    where = f"{sync.__module__}.{sync.__name__}"
    run.__doc__ = f"Async :func:`{where}` (runs it in a worker thread){may_be_async}."
    return run


_twins: dict[str, Callable[..., Awaitable[Any]]] = {}


def _twin(name: str) -> Callable[..., Awaitable[Any]]:
    """The async twin of an assertion of ``ktest.public_api.ASSERTIONS``, made on first use."""
    if name not in ASSERTIONS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _twins:
        module, callbacks = ASSERTIONS[name]
        sync = getattr(importlib.import_module(assertion_module(module)), name)
        _twins[name] = _threaded(sync, callbacks=callbacks)
    return _twins[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *ASSERTIONS})


# Type checkers do not run ``__getattr__``: they see each twin as what ``_threaded`` makes of its
# assertion (the same parameters, an awaitable of the same result), so a misspelt name or a wrong
# argument is an error, not ``Any``. tests/test_public_api.py keeps this list equal to ASSERTIONS.
if TYPE_CHECKING:
    from ktest.assertions import conditions as _conditions
    from ktest.assertions import conflicts as _conflicts
    from ktest.assertions import finalizers as _finalizers
    from ktest.assertions import ownership as _ownership
    from ktest.assertions import quiescence as _quiescence
    from ktest.assertions import status as _status
    from ktest.assertions import traffic as _traffic
    from ktest.crd_versions import assertions as _crd_versions
    from ktest.plane_upgrade import assertions as _upgrade
    from ktest.webhooks import assertions as _webhooks

    assert_has_finalizer = _threaded(_finalizers.assert_has_finalizer)
    assert_deletion_blocked = _threaded(_finalizers.assert_deletion_blocked)
    assert_gone = _threaded(_finalizers.assert_gone)
    assert_owned_by = _threaded(_ownership.assert_owned_by)
    assert_garbage_collected = _threaded(_ownership.assert_garbage_collected)
    assert_orphaned = _threaded(_ownership.assert_orphaned)
    assert_status_subresource = _threaded(_status.assert_status_subresource)
    assert_observed_generation = _threaded(_status.assert_observed_generation)
    assert_condition = _threaded(_conditions.assert_condition)
    assert_transition_time_stable = _threaded(_conditions.assert_transition_time_stable)
    assert_quiescent = _threaded(_quiescence.assert_quiescent)
    assert_rejected = _threaded(_webhooks.assert_rejected)
    assert_defaulted = _threaded(_webhooks.assert_defaulted)
    assert_converts = _threaded(_webhooks.assert_converts)
    assert_round_trips = _threaded(_crd_versions.assert_round_trips)
    assert_stored_as = _threaded(_crd_versions.assert_stored_as)
    stale_copy = _threaded(_conflicts.stale_copy)
    assert_conflict_on_stale_update = _threaded(_conflicts.assert_conflict_on_stale_update)
    assert_survives_concurrent_writes = _threaded(_conflicts.assert_survives_concurrent_writes)
    assert_no_hot_loop = _threaded(_traffic.assert_no_hot_loop)
    assert_recovers = _threaded(_traffic.assert_recovers)
    assert_backs_off = _threaded(_traffic.assert_backs_off)
    assert_relists_after_410 = _threaded(_traffic.assert_relists_after_410)
    assert_objects_intact = _threaded(_upgrade.assert_objects_intact)
    assert_recovered_after_upgrade = _threaded(_upgrade.assert_recovered_after_upgrade)
    assert_no_removed_api_calls = _threaded(_upgrade.assert_no_removed_api_calls)
else:
    __getattr__ = _twin


async def finalizer_scenario(
    cluster: Cluster,
    obj: RefLike,
    finalizer: str,
    *,
    break_cleanup: Callable[[], object] | Callable[[], Awaitable[object]] | None = None,
    fix_cleanup: Callable[[], object] | Callable[[], Awaitable[object]] | None = None,
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


_CALLBACK_TIMEOUT = 600.0
"""Seconds a coroutine given to an assertion may run on the test's event loop (a loop blocked by
a sync call awaiting the assertion itself never runs it: then the assertion says so)."""


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """``fn`` callable from a worker thread: coroutines it returns run on ``loop``."""
    return None if fn is None else _OnLoop(loop, fn)


class _OnLoop:
    """A callback called from a worker thread; a coroutine it returns runs on ``loop``.

    ``wrapped_check`` and ``with_check`` let ``eventually`` show what the test's own check
    compared (it rewrites that function, then wraps the rewritten one the same way)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any]) -> None:
        self.loop = loop
        self.wrapped_check = fn

    def __call__(self, *args: Any) -> Any:
        return _run_on(self.loop, functools.partial(self.wrapped_check, *args))

    def with_check(self, fn: Callable[..., Any]) -> _OnLoop:
        return _OnLoop(self.loop, fn)


def _run_on(loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> Any:
    value = fn()
    if inspect.isawaitable(value):
        from ktest.base.bounded import future_result
        from ktest.errors import KtestError

        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", fn)
        what = (
            f"the coroutine of {name!s} to finish on the test's event loop (is the loop blocked by "
            "a call that waits for this assertion?)"
        )
        future = asyncio.run_coroutine_threadsafe(_await(value), loop)
        return future_result(future, _CALLBACK_TIMEOUT, what, KtestError)
    return value


async def _await(value: Awaitable[_T]) -> _T:
    return await value


__all__ = sorted([*ASSERTIONS, "ConcurrentWriter", "finalizer_scenario"])
