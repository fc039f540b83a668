"""Whether operators started by ktest's runners go through the API proxy, and whether it offers
HTTP/2: on unless turned off (settings ``ktest_operator_proxy``, ``ktest_operator_proxy_http2``;
``proxy=False`` on a runner, ``http2=False`` on ``OperatorProxy``). ContextVars, like the wait
defaults, so the pytest plugin sets them for its session and nothing leaks between sessions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

_enabled: ContextVar[bool] = ContextVar("ktest_operator_proxy", default=True)
_http2: ContextVar[bool] = ContextVar("ktest_operator_proxy_http2", default=True)


def operator_proxy_default() -> bool:
    """Whether a runner given ``proxy=None`` starts the operator behind the proxy."""
    return _enabled.get()


@contextmanager
def _holding(var: ContextVar[bool], value: bool) -> Iterator[None]:
    token = var.set(bool(value))
    try:
        yield
    finally:
        var.reset(token)


def use_operator_proxy(enabled: bool) -> AbstractContextManager[None]:
    """Make ``enabled`` the default inside the block."""
    return _holding(_enabled, enabled)


def operator_proxy_http2_default() -> bool:
    """Whether an ``OperatorProxy`` given ``http2=None`` offers HTTP/2."""
    return _http2.get()


def use_operator_proxy_http2(enabled: bool) -> AbstractContextManager[None]:
    """Make ``enabled`` the HTTP/2 default inside the block."""
    return _holding(_http2, enabled)
