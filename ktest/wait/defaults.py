"""Default timeout, poll interval and consistently-window for ``eventually``/``consistently``.

The values are those kubebuilder's envtest tutorials use (10 s, 250 ms, 2 s).  They live
in a ContextVar so the pytest plugin (or a test) can change them for a scope without
global state leaking into other tests: ``with use_defaults(timeout=30): ...``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ktest.errors import ConfigError


def check_seconds(name: str, value: object, *, allow_zero: bool) -> float:
    """Return ``value`` as float seconds, or raise ConfigError saying what is wrong."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(
            f"wait {name}={value!r} is not a number of seconds; "
            f"pass an int or float such as {name}=5"
        )
    seconds = float(value)
    if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(
            f"wait {name}={value!r} is out of range: it must be {bound} seconds "
            f"(and finite); pass for example {name}=1.5"
        )
    if math.isinf(seconds):
        raise ConfigError(
            f"wait {name}=inf would wait forever; pass a finite number of seconds"
        )
    return seconds


@dataclass(frozen=True)
class WaitDefaults:
    """Seconds used when a call leaves ``timeout``/``interval``/``duration`` unset."""

    timeout: float = 10.0
    interval: float = 0.25
    duration: float = 2.0

    def __post_init__(self) -> None:
        check_seconds("timeout", self.timeout, allow_zero=True)
        check_seconds("interval", self.interval, allow_zero=False)
        check_seconds("duration", self.duration, allow_zero=True)


_BUILT_IN = WaitDefaults()
_current: ContextVar[WaitDefaults] = ContextVar("ktest_wait_defaults")


def current_defaults() -> WaitDefaults:
    """The defaults in effect in the calling context."""
    return _current.get(_BUILT_IN)


@contextmanager
def use_defaults(
    defaults: WaitDefaults | None = None,
    *,
    timeout: float | None = None,
    interval: float | None = None,
    duration: float | None = None,
) -> Iterator[WaitDefaults]:
    """Use other defaults inside the ``with`` block (and in tasks started from it).

    Pass a whole ``WaitDefaults`` or only the fields to change; unset fields keep
    their current value.
    """
    base = defaults if defaults is not None else current_defaults()
    changes = {
        name: value
        for name, value in (("timeout", timeout), ("interval", interval), ("duration", duration))
        if value is not None
    }
    new = dataclasses.replace(base, **changes)
    token = _current.set(new)
    try:
        yield new
    finally:
        _current.reset(token)
