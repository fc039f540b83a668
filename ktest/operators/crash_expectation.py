"""Expected crashes: ``with op.expect_crash(match=...)`` makes an operator's failure the outcome a
test asserts instead of a failure of the test.

:class:`CrashExpectation` keeps, for one operator handle, whether a failure is expected now, the
records that follow the failure (kept with it), and the short aftermath after the block in which
further ERROR records still belong to the expected crash; the handle asks it before it records
or raises a failure.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ktest.errors import OperatorError

DEFAULT_CRASH_AFTERMATH = 2.0
"""Seconds after an expected crash during which the operator's further ERROR records belong to it."""
POLL = 0.02
"""How often a waiting test's thread looks at the operator again when nothing woke it."""


@dataclass
class ExpectedCrash:
    """What :meth:`OperatorHandle.expect_crash` saw: the operator's error, once the block ended."""

    error: OperatorError | None = None
    aftermath: list[str] = field(default_factory=list)
    """ERROR records the operator logged right after the failure (kopf logs a handler's exception,
    then that the handler failed): part of the same expected crash, never a failure of their own."""

    @property
    def message(self) -> str:
        return str(self.error) if self.error is not None else ""


@dataclass
class FailureProbe:
    """What :meth:`CrashExpectation.expect` asks of the handle: its name, its error now (recorded
    once found), its state and the tail of its log for the message when it did not fail, and how
    to forget the error once it was expected."""

    name: str
    error: Callable[[], OperatorError | None]
    wake: threading.Event
    state: Callable[[], str]
    log_tail: Callable[[], str]
    acknowledge: Callable[[], OperatorError | None]


class CrashExpectation:
    """One operator handle's expected crashes (the handle's lock guards it)."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self.expecting = 0
        """How many ``expect_crash`` blocks are open: while one is, a failure raises nothing."""
        self.following: list[str] = []
        """What the run logged after its first failure (collected into ``ExpectedCrash.aftermath``)."""
        self._outcome: ExpectedCrash | None = None
        self._until = 0.0

    def new_run(self) -> None:
        """A new run starts: the aftermath of an earlier one is over."""
        self._outcome = None

    def aftermath_open(self) -> bool:
        """Whether records logged now still belong to an expected crash."""
        with self._lock:
            return self._outcome is not None and time.monotonic() <= self._until

    def take_into_aftermath(self, text: str) -> bool:
        """An ERROR record right after an expected crash: kept with it (True), not a failure."""
        with self._lock:
            if self._outcome is None or not self.aftermath_open():
                return False
            self._outcome.aftermath.append(text)
            return True

    @contextlib.contextmanager
    def expect(
        self,
        probe: FailureProbe,
        match: str | re.Pattern[str] | None,
        timeout: float | None,
        aftermath: float,
    ) -> Iterator[ExpectedCrash]:
        """The body of :meth:`OperatorHandle.expect_crash` (see there)."""
        __tracebackhide__ = True
        outcome = ExpectedCrash()
        pattern = re.compile(match) if isinstance(match, str) else match
        with self._lock:
            self.expecting += 1
        try:
            yield outcome
            timeout = _crash_timeout(timeout)  # the defaults in force when the block ends
            failure = _wait_for_failure(probe, timeout)
        finally:
            with self._lock:
                self.expecting -= 1
        wanted = f" with an error matching /{pattern.pattern}/" if pattern is not None else ""
        if failure is None:
            raise AssertionError(
                f"operator {probe.name!r} was expected to fail{wanted}, but it is still healthy "
                f"({probe.state()}) {timeout:g} s after the block.\n"
                f"--- last lines of its log ---\n{probe.log_tail() or '(nothing logged)'}"
            )
        if pattern is not None and not pattern.search(str(failure)):
            raise AssertionError(
                f"operator {probe.name!r} failed, but not as expected: /{pattern.pattern}/ is not in its "
                f"error:\n{failure}"
            )
        with self._lock:
            outcome.aftermath.extend(self.following)
            outcome.error = probe.acknowledge()
            self._outcome = outcome
            self._until = time.monotonic() + aftermath


def _crash_timeout(timeout: float | None) -> float:
    if timeout is not None:
        return timeout
    from ktest.wait.defaults import current_defaults

    return current_defaults().timeout


def _wait_for_failure(probe: FailureProbe, timeout: float) -> OperatorError | None:
    deadline = time.monotonic() + timeout
    while True:
        failure = probe.error()
        if failure is not None or time.monotonic() >= deadline:
            return failure
        probe.wake.wait(POLL)
        probe.wake.clear()
