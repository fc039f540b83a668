"""What the current test run knows about: operator health and report sections.

Operators started by a test (or for the whole session) register two things
here: a *health check* that raises when the operator crashed, so that the next
``eventually`` or the test's teardown fails with the operator's own error
instead of a timeout; and a *report section* (its logs) that the pytest plugin
attaches to a failing test's report.

Contexts nest: the plugin opens one for the session and one per test, each in
a ``ContextVar``, so nothing leaks between tests. Outside any context,
registration is a no-op; plain-Python code opens one with
``with run_context("mine"):`` to get the same behaviour.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

HealthCheck = Callable[[], None]
"""Raises (typically ``OperatorError``) when something the test depends on has failed."""

SectionProvider = Callable[[], str]
"""Returns the text of a report section (for example the operator's log for this test)."""


@dataclass
class RunContext:
    """Health checks, report sections and per-test hooks of one scope (session or test)."""

    name: str
    parent: RunContext | None = None
    health_checks: list[HealthCheck] = field(default_factory=list)
    sections: list[tuple[str, SectionProvider]] = field(default_factory=list)
    test_start_hooks: list[Callable[[RunContext], None]] = field(default_factory=list)
    is_test: bool = False
    """Opened for one test (``run_context(..., test=True)``) rather than a wider scope."""
    started: float = field(default_factory=time.time)
    created: list[tuple[str, str, str, str]] = field(default_factory=list)
    """Cluster-scoped custom objects created in this scope through ktest, as
    (apiVersion, kind, name, uid): namespaces do not clean them up (``operator_for_test`` does)."""

    def chain(self) -> Iterator[RunContext]:
        context: RunContext | None = self
        while context is not None:
            yield context
            context = context.parent


_current: ContextVar[RunContext | None] = ContextVar("ktest_run_context", default=None)


def current() -> RunContext | None:
    return _current.get()


@contextlib.contextmanager
def run_context(name: str, *, test: bool = False) -> Iterator[RunContext]:
    """Open a nested context; with ``test=True``, run the enclosing scopes' test-start hooks."""
    parent = _current.get()
    context = RunContext(name, parent, is_test=test)
    token = _current.set(context)
    try:
        if test:
            for scope in context.chain():
                for hook in list(scope.test_start_hooks):
                    hook(context)
        yield context
    finally:
        _current.reset(token)


@contextlib.contextmanager
def use_context(context: RunContext) -> Iterator[RunContext]:
    """Make an existing ``context`` current inside the block.

    The pytest plugin sets session-scoped fixtures up in the session's context,
    so what they register outlives the test that happened to request them first.
    """
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def current_test() -> RunContext | None:
    """The context of the test running now (its setup, call and teardown), or None."""
    context = _current.get()
    return next((scope for scope in context.chain() if scope.is_test), None) if context else None


def note_created(api_version: str, kind: str, name: str, uid: str) -> None:
    """Record a cluster-scoped custom object the current test created (no-op outside a test)."""
    test = current_test()
    if test is not None:
        test.created.append((api_version, kind, name, uid))


def add_health_check(check: HealthCheck) -> Callable[[], None]:
    """Register ``check`` in the current scope; returns a function that unregisters it."""
    context = _current.get()
    if context is None:
        return lambda: None
    context.health_checks.append(check)
    return lambda: _discard(context.health_checks, check)


def add_report_section(title: str, provider: SectionProvider) -> None:
    """Attach a section to the current test's report if it fails (no-op outside a test run)."""
    context = _current.get()
    if context is not None:
        context.sections.append((title, provider))


def on_each_test(hook: Callable[[RunContext], None]) -> Callable[[], None]:
    """Call ``hook(test_context)`` when each later test starts (session-scoped operators use it)."""
    context = _current.get()
    if context is None:
        return lambda: None
    context.test_start_hooks.append(hook)
    return lambda: _discard(context.test_start_hooks, hook)


def check_health() -> None:
    """Run every health check visible from here; the first failure propagates."""
    context = _current.get()
    if context is None:
        return
    for scope in context.chain():
        for check in list(scope.health_checks):
            check()


def _discard(items: list, item: object) -> None:
    with contextlib.suppress(ValueError):
        items.remove(item)
