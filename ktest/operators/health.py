"""How an operator handle judges its operator: died, raised, logged an error, or was refused by
RBAC; the error is recorded once found, raised once per test by the health check, and forgotten
when a test provoked it on purpose (:meth:`OperatorHealth.acknowledge_error`, ``expect_crash``).

:class:`OperatorHealth` is the base of :class:`~ktest.operators.operator.OperatorHandle`, which
adds the lifecycle (start, stop, crash, restart, close); the kinds supply how a run ends by
itself and what was run.
"""

from __future__ import annotations

import abc
import threading
from typing import ClassVar

from ktest import run_context
from ktest.errors import OperatorError
from ktest.operators.crash_expectation import CrashExpectation
from ktest.operators.denials import Denial, find_denials
from ktest.operators.go_traces import fold_goroutines
from ktest.operators.logs import TAIL_LINES, OperatorLog, readable_api_dumps


class OperatorHealth(abc.ABC):
    """The failure state of an operator handle (its lock guards it)."""

    kind: ClassVar[str] = "operator"

    def __init__(self, name: str, log: OperatorLog, *, fail_on_errors: bool, fail_on_forbidden: bool) -> None:
        self.name = name
        self.log = log
        self.fail_on_errors = fail_on_errors
        self.fail_on_forbidden = fail_on_forbidden
        self._state = "new"  # new, running, stopped, crashed, closed
        self._failure: OperatorError | None = None
        self._failure_raised = False
        self._run_mark = 0
        self._scanned = 0
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._crashes = CrashExpectation(self._lock)
        self._reported: tuple[OperatorError, object] | None = None
        self.excused: str | None = None
        """Why failures are expected now (it is cut off from the API server, say): while set, the
        health check reports none; whoever set it acknowledges them when it clears it."""

    @abc.abstractmethod
    def _running(self) -> bool:
        """Whether the current run is still going."""

    @abc.abstractmethod
    def _death_reason(self) -> str:
        """How the current run ended by itself (exit status, exception with traceback)."""

    def _describe(self) -> str:
        """What was run (command line, modules), for error messages."""
        return ""

    @property
    def denials(self) -> list[Denial]:
        """RBAC refusals found in the output of the current run."""
        return find_denials(self.log.since(self._run_mark))

    @property
    def error(self) -> OperatorError | None:
        """Why the operator is unhealthy (died, raised, denied), or None.

        Stopping or crashing it on purpose is not an error.
        """
        with self._lock:
            if self._failure is None and self._state == "running":
                self._failure = self._detect_failure()
            return self._failure

    def check(self) -> None:
        """Raise the operator's error if it has one (this is the registered health check).

        Inside :meth:`expect_crash` it raises nothing: the failure is the expected outcome.
        A failure is raised once per test: the checks of that test's teardown (fixtures that
        wait, ``operator_for_test``'s clean-up) do not report it again.
        """
        __tracebackhide__ = True
        if self._crashes.expecting or self.excused is not None:
            return
        failure = self.error
        if failure is None:
            return
        test = run_context.current_test()
        if test is not None and self._reported == (failure, test):
            return  # this test already failed with it: its teardown and fixtures do not repeat it
        self._reported = (failure, test)
        self._failure_raised = True
        raise OperatorError(str(failure))

    def unreported_error(self) -> OperatorError | None:
        """The operator's error if no health check or ``check()`` has raised it yet."""
        with self._lock:
            failure = self.error
            return None if failure is None or self._failure_raised else failure

    def acknowledge_error(self) -> OperatorError | None:
        """Return the current error and forget it, for tests that provoke one on purpose.

        Errors found later (a new log line, the operator dying) are reported again.
        """
        with self._lock:
            failure = self.error
            self._failure = None
            self._failure_raised = False
            if failure is not None:
                self._scanned = self.log.mark()
                if self._state == "running" and not self._running():
                    self._state = "stopped"
            return failure

    def _detect_failure(self) -> OperatorError | None:
        if not self._running():
            return self._make_error(self._death_reason(), hint=self._denial_hint())
        if self.fail_on_forbidden:
            lines, self._scanned = self.log.complete_lines(self._scanned)
            found = find_denials(lines)
            if found:
                return self._denial_error(found[0])
        return None

    def _denial_error(self, denial: Denial) -> OperatorError:
        return self._make_error(
            f"was refused by RBAC: {denial.describe()}",
            details=f"Log line: {denial.line}",
            hint=f"Grant it in the operator's RBAC (e.g. config/rbac/role.yaml): add the rule "
            f"{denial.missing_rule()}. Pass fail_on_forbidden=False if the operator expects this refusal.",
        )

    def _denial_hint(self) -> str:
        found = self.denials
        if not found:
            return ""
        return (
            f"It was refused by RBAC first: {found[0].describe()}; add the rule "
            f"{found[0].missing_rule()} to its role."
        )

    def _record_logged_error(self, text: str, hint: str = "") -> None:
        """An ERROR record of an in-process operator: a failure, named precisely if it is an RBAC denial."""
        denials = find_denials(text) if self.fail_on_forbidden else []
        if denials:
            with self._lock:
                if self._state == "running" and self._failure is None:
                    self._failure = self._denial_error(denials[0])
            self._wake.set()
        elif self._crashes.take_into_aftermath(text):
            return
        elif self.fail_on_errors or self._crashes.expecting:
            self._record_failure("logged an error", details=text, hint=hint)

    def _record_failure(self, what: str, details: str = "", hint: str = "") -> None:
        """Mark the current run failed (first failure wins; what follows is kept with it, for
        :meth:`expect_crash`); used by in-process kinds."""
        with self._lock:
            if self._state == "running" and self._failure is None:
                self._failure = self._make_error(what, details=details, hint=hint)
                self._crashes.following = []
            elif self._failure is not None:
                self._crashes.following.append(details or what)
        self._wake.set()

    def _make_error(self, what: str, *, details: str = "", hint: str = "") -> OperatorError:
        described = self._describe()
        log = fold_goroutines(
            self.log.since(self._run_mark),
            lambda count: f"... {count} more goroutines folded (the operator's `logs` has them all)",
        ).text
        tail = readable_api_dumps("\n".join(log.splitlines()[-TAIL_LINES:])) or "(nothing logged)"
        parts = [f"operator {self.name!r} ({self.kind}) {what}."]
        if details:
            parts.append(readable_api_dumps(details).rstrip())
        if described:
            parts.append(described)
        parts.append(f"--- last lines of its log ({self.log.path}) ---\n{tail}\n--- end of log ---")
        if hint:
            parts.append(hint)
        return OperatorError("\n".join(parts))
