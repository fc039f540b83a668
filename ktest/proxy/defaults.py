"""Whether operators started by ktest's runners go through the API proxy by default.

On unless turned off (setting ``ktest_operator_proxy = off``, or ``proxy=False``
on one runner). Kept in a ContextVar, like the wait defaults, so the pytest
plugin sets it for its session and nothing leaks between sessions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_enabled: ContextVar[bool] = ContextVar("ktest_operator_proxy", default=True)


def operator_proxy_default() -> bool:
    """Whether a runner given ``proxy=None`` starts the operator behind the proxy."""
    return _enabled.get()


@contextmanager
def use_operator_proxy(enabled: bool) -> Iterator[None]:
    """Make ``enabled`` the default inside the block."""
    token = _enabled.set(bool(enabled))
    try:
        yield
    finally:
        _enabled.reset(token)
