"""One call of ``eventually``/``consistently``: its settings, its attempts, and the
tenacity strategies built from them.  The sync and async front ends share it and
differ only in how they call the check and how they sleep.

tenacity stays in charge of the loop: ``retry`` decides from each attempt's verdict,
``stop`` ends the window, ``wait`` gives the poll interval (capped so the last
attempt lands on the deadline) and ``sleep`` is a sleep that ends early when a
watched object changes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from tenacity import RetryCallState, retry_if_result, stop_after_delay

from ktest.cluster.reads import ReadTarget, recording_reads, target_of
from ktest.errors import ConfigError
from ktest.run_context import check_health
from ktest.wait import checks, comparison, operands, report, wakeup
from ktest.wait.defaults import check_seconds, current_defaults
from ktest.wait.transient import Verdict, classify, describe

if TYPE_CHECKING:
    from typing_extensions import Unpack

Kind = Literal["eventually", "consistently"]

Watch = Iterable[Any] | Any | Literal[False] | None


class WaitOptions(TypedDict, total=False):
    """The keyword arguments ``eventually`` and ``consistently`` share (sync and async)."""

    interval: float | None
    watch: Watch
    cluster: Any
    description: str | None


class _NoValue:
    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE: Any = _NoValue()


@dataclass
class Attempt:
    """One evaluation of the check."""

    number: int
    at: float  # seconds since the call began
    verdict: Verdict
    value: Any = NO_VALUE
    error: BaseException | None = None
    seen: dict[str, Any] = field(default_factory=dict)  # the check's locals when it raised
    message: str = ""  # how it ended, in words
    compared: list[str] = field(default_factory=list)  # its last expression's operands, shown


AttemptObserver = Callable[["WaitRun", Attempt], None]
"""Called after each attempt of an ``eventually``/``consistently`` (a timeline recording)."""

attempt_observers: ContextVar[tuple[AttemptObserver, ...]] = ContextVar("ktest_attempt_observers", default=())
"""Who is told of the attempts made in this context (see ktest.timeline)."""


class WaitRun:
    """Settings and history of one ``eventually``/``consistently`` call."""

    def __init__(
        self,
        kind: Kind,
        fn: Callable[[], Any],
        *,
        window: float | None,
        **options: Unpack[WaitOptions],
    ) -> None:
        window_name = "timeout" if kind == "eventually" else "duration"
        unknown = sorted(set(options) - set(WaitOptions.__annotations__))
        if unknown:
            raise TypeError(
                f"{kind}() got an unexpected keyword argument {unknown[0]!r}; it takes "
                f"{window_name}=, {'=, '.join(WaitOptions.__annotations__)}="
            )
        if not callable(fn):
            raise TypeError(f"{kind}() needs a callable check, got {fn!r}; pass e.g. lambda: ...")
        interval, watch = options.get("interval"), options.get("watch")
        cluster, description = options.get("cluster"), options.get("description")
        defaults = current_defaults()
        default_window = defaults.timeout if kind == "eventually" else defaults.duration
        self.kind = kind
        self.fn = fn
        self.window = check_seconds(
            window_name, default_window if window is None else window, allow_zero=True
        )
        self.interval = check_seconds(
            "interval", defaults.interval if interval is None else interval, allow_zero=False
        )
        self.description = description or report.describe_callable(fn)
        self.assertion_style = checks.is_assertion_style(fn)
        self.instrumented = operands.instrument(fn)
        self.check = self.instrumented.call  # what each attempt calls: ``fn``, maybe rewritten
        self.watching = watch is not False
        self.explicit_targets = _explicit_targets(kind, watch, cluster)
        self.started = time.monotonic()
        self.attempts: list[Attempt] = []
        self.last_with_value: Attempt | None = None
        self.last_passed: Attempt | None = None
        self.passed = 0
        self.wakeups = 0
        self._attempt_began = self.started
        self._reads: list[tuple[Any, frozenset[ReadTarget]]] = []

    # -- attempts -------------------------------------------------------------------

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """Wrap one evaluation of the check: stamps its start, records its reads.

        First, an operator registered with :mod:`ktest.run_context` that has crashed
        fails the wait at once with its own error, rather than after the timeout.
        """
        check_health()
        if self.instrumented.capture is not None:
            self.instrumented.capture.take()
        self._attempt_began = time.monotonic()
        with recording_reads() as recorder:
            try:
                yield
            finally:
                self._reads = recorder.by_cluster()

    def verdict_for(self, exc: Exception) -> Verdict | None:
        """The verdict for an exception of the check; None: re-raise it (annotated)."""
        verdict = classify(exc, waiting_for_appearance=self.kind == "eventually")
        if verdict is None and hasattr(exc, "add_note"):
            exc.add_note(
                f"raised by {self.kind}({self.description}) on attempt {len(self.attempts) + 1}, "
                f"{self._elapsed():.2f}s in; only AssertionError and transient API errors "
                "(404 while waiting, 409, 429, 5xx, connection errors) are retried, and lookup "
                "errors (KeyError, IndexError, None used as an object)"
            )
        return verdict

    def record(
        self, *, value: Any = NO_VALUE, error: BaseException | None = None, verdict: Verdict | None = None
    ) -> Attempt:
        """Remember the outcome of the attempt that just ended."""
        if verdict is None:
            passed = checks.passes(value, assertion_style=self.assertion_style)
            verdict = Verdict.PASSED if passed else Verdict.FAILED
        seen = report.seen_locals(error, self.check) if error is not None else {}
        attempt = Attempt(
            len(self.attempts) + 1,
            self._attempt_began - self.started,
            verdict,
            value,
            error,
            seen,
            self._describe_outcome(value, error),
            self._compared(value, error),
        )
        self.attempts.append(attempt)
        if value is not NO_VALUE and not (value is None and self.assertion_style):
            self.last_with_value = attempt
        if verdict is Verdict.PASSED:
            self.passed += 1
            self.last_passed = attempt
        for observe in attempt_observers.get():
            observe(self, attempt)
        return attempt

    def _compared(self, value: Any, error: BaseException | None) -> list[str]:
        """The operands of the check's last expression in this attempt, if it got that far."""
        expression, capture = self.instrumented.expression, self.instrumented.capture
        if expression is None or capture is None:
            return []
        values = capture.take()
        if error is not None or value is NO_VALUE or expression.index not in values:
            return []
        try:
            return comparison.describe(expression, values)
        except Exception as failure:  # e.g. a value whose repr raises
            return [expression.source, f"(its values cannot be shown: {type(failure).__name__}: {failure})"]

    def _describe_outcome(self, value: Any, error: BaseException | None) -> str:
        if error is not None:
            if checks.is_missing(error):
                missing = checks.describe_missing(error, self.fn)
                return f"not there yet: {missing}" if self.kind == "eventually" else missing
            return describe(error)
        if value is None and self.assertion_style:
            return "the check ran to its end (assertion-style: no return value)"
        return f"the check returned {report.short_value(value)}"

    # -- tenacity strategies --------------------------------------------------------

    def retrying_options(self) -> dict[str, Any]:
        """stop/wait/retry/callback for ``Retrying``/``AsyncRetrying`` (sleep is added by
        the caller)."""
        decisive = Verdict.PASSED if self.kind == "eventually" else Verdict.FAILED  # ends the loop early
        return {
            "stop": stop_after_delay(self.window),
            "wait": self._pause,
            "retry": retry_if_result(lambda attempt: attempt.verdict is not decisive),
            "retry_error_callback": self._window_over,
        }

    def _pause(self, retry_state: RetryCallState) -> float:
        """The poll interval, cut so that the final attempt lands right on the deadline."""
        elapsed = retry_state.seconds_since_start or 0.0
        return max(0.0, min(self.interval, self.window - elapsed))

    def _window_over(self, retry_state: RetryCallState) -> Attempt:
        """The attempt that decides the call once the window is over."""
        if self.kind == "consistently" and self.last_passed is not None:
            return self.last_passed
        return self.attempts[-1]

    def passing_value(self, decisive: Attempt) -> Any:
        """The value of ``decisive`` (what tenacity returned), or the failure if it is not a pass.

        Raised here, in the caller's frame, so the traceback skips tenacity's loop.
        """
        __tracebackhide__ = True
        if decisive.verdict is not Verdict.PASSED:
            raise self.failure() from decisive.error
        return decisive.value

    def wake_targets(self) -> list[tuple[Any, frozenset[ReadTarget]]]:
        """Targets whose changes end the sleep: this attempt's reads plus ``watch=``."""
        if not self.watching:
            return []
        return self._reads + self.explicit_targets

    def sleep(self, seconds: float) -> None:
        if seconds > 0 and wakeup.wait_for_change(self.wake_targets(), self._attempt_began, seconds):
            self.wakeups += 1

    async def async_sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
        elif await wakeup.async_wait_for_change(self.wake_targets(), self._attempt_began, seconds):
            self.wakeups += 1

    # -- messages -------------------------------------------------------------------

    def failure(self) -> AssertionError:
        """The AssertionError saying how the check failed."""
        if self.kind == "eventually":
            return AssertionError(self._eventually_message())
        return AssertionError(self._consistently_message())

    def _eventually_message(self) -> str:
        last = self.attempts[-1]
        lines = [
            f"eventually({self.description}) did not pass within {self.window:g}s: "
            f"{report.plural(len(self.attempts), 'attempt')} in {self._elapsed():.2f}s.",
            report.block(f"Last failure (attempt {last.number}, at {last.at:.2f}s):", last.message),
            *self._compared_lines(last),
            *self._seen_lines(last, self.last_with_value, "Last value returned"),
            *self._falsy_hint(),
            self._wakeup_line(),
        ]
        return "\n".join(lines)

    def _falsy_hint(self) -> list[str]:
        """Why a returned falsy value did not count, and how to write the check instead."""
        returned = self.last_with_value
        if returned is None or returned.verdict is Verdict.PASSED:
            return []
        if returned.value is None:
            if checks.source_unknown(self.fn):
                why = (
                    "ktest could not read the check's source to see that it is assertion-style "
                    "(a def with no `return value`)"
                )
            else:
                why = "a check that returns a value (every lambda does) passes only on a truthy value"
            return [
                f"None means not yet: {why}. If the check calls an assertion helper that returns "
                "None (e.g. lambda: assert_ready(obj)), make it a def without return (def check(): "
                "assert_ready(obj)) or end it with `return True`."
            ]
        if returned.value is not False:
            return [
                f"{report.short_value(returned.value)} is falsy, so it means not yet (a check passes "
                "on a truthy value); compare explicitly instead, e.g. lambda: count() == 0."
            ]
        return []

    def _consistently_message(self) -> str:
        last = self.attempts[-1]
        if last.verdict is not Verdict.FAILED:
            lines = [
                f"consistently({self.description}) could not evaluate the check during its "
                f"{self.window:g}s window: all {report.plural(len(self.attempts), 'attempt')} "
                "hit transient API errors.",
                report.block(f"Last error (attempt {last.number}, at {last.at:.2f}s):", last.message),
            ]
            return "\n".join([*lines, self._wakeup_line()])
        if self.last_passed is None:
            held = "It never held: the first attempt failed."
        else:
            held = (
                f"It held before: {report.plural(self.passed, 'attempt')} passed, "
                f"the last at {self.last_passed.at:.2f}s."
            )
        lines = [
            f"consistently({self.description}) broke on attempt {last.number}, "
            f"{last.at:.2f}s into its {self.window:g}s window: {self._what_changed(last)}.",
            held,
            report.block("Failure:", last.message),
            *self._compared_lines(last),
        ]
        if last.value is not NO_VALUE:
            lines += self._seen_lines(last, last, "Value at the break")
        else:
            lines += self._seen_lines(last, self.last_with_value, "Last value before the break")
        lines.append(self._wakeup_line())
        return "\n".join(lines)

    def _compared_lines(self, last: Attempt) -> list[str]:
        """What the last expression compared at ``last`` (and at the first attempt, when that
        differed), or why ktest cannot show it."""
        if not last.compared:
            why_not = self.instrumented.why_not
            if why_not and last.error is None:
                return [f"ktest cannot show the values the check compared: {why_not}."]
            return []
        lines = [report.block(f"Compared (attempt {last.number}):", "\n".join(last.compared))]
        first = self.attempts[0]
        if first is not last and first.compared and first.compared != last.compared:
            title = f"Compared at the first attempt (at {first.at:.2f}s):"
            lines.append(report.block(title, "\n".join(first.compared)))
        return lines

    def _what_changed(self, broke: Attempt) -> str:
        """The headline's account of the break: the result before and after."""
        before = self.last_passed
        had_value = (
            before is not None
            and before.value is not NO_VALUE
            and not (before.value is None and self.assertion_style)
        )
        previous = report.short_value(before.value, limit=80) if had_value and before else ""
        if broke.error is not None:
            now = broke.message.splitlines()[0] if broke.message else type(broke.error).__name__
            if not checks.is_missing(broke.error):
                now = f"it now raises {now}"
            return now + (f" (it had returned {previous})" if previous else "")
        now_value = report.short_value(broke.value, limit=80)
        if previous:
            return f"its result changed from {previous} to {now_value}"
        return f"it returned {now_value}"

    def _seen_lines(self, last: Attempt, returned: Attempt | None, title: str) -> list[str]:
        """The last value seen: the check's variables when it last raised, and the last
        value it returned."""
        lines = []
        if last.seen:
            lines.append(
                report.block(
                    f"Values the check saw (attempt {last.number}):", report.format_locals(last.seen)
                )
            )
        if returned is not None:
            lines.append(
                report.block(f"{title} (attempt {returned.number}):", report.format_value(returned.value))
            )
        if not lines:
            lines.append(
                "Last value seen: none (the check raised every time, before "
                "returning, and has no variables to show)."
            )
        return lines

    def _wakeup_line(self) -> str:
        polling = f"polling every {self.interval:g}s"
        if not self.watching:
            return f"Re-evaluated by {polling} (watch wake-up turned off)."
        targets = self.wake_targets()
        if not targets:
            return f"Re-evaluated by {polling} (the check read no objects through a Cluster)."
        names = sorted(str(t) for _, group in targets for t in group)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        line = f"Re-evaluated by {polling} and on watch events for {shown}"
        line += f" ({report.plural(self.wakeups, 'wake-up')})."
        problems = wakeup.describe_problems(targets)
        if problems:
            line += " No watch for " + "; ".join(problems) + "."
        return line

    def _elapsed(self) -> float:
        return time.monotonic() - self.started


def _explicit_targets(kind: Kind, watch: Any, cluster: Any) -> list[tuple[Any, frozenset[ReadTarget]]]:
    if watch is None or watch is False:
        return []
    if watch is True:
        raise ConfigError(
            f"{kind}(watch=True) is not a list of objects: watch-driven wake-up is on by "
            "default for objects read through a Cluster; pass watch=[obj, ...] with "
            "cluster=... to add objects, or watch=False to only poll"
        )
    single = (
        isinstance(watch, Mapping)
        or (isinstance(watch, tuple) and bool(watch) and isinstance(watch[0], str))
        or hasattr(watch, "kind")
    )
    items = [watch] if single else list(watch)
    if cluster is None:
        raise ConfigError(
            f"{kind}(watch=[...]) needs cluster=: the watched objects must be watched on a "
            "cluster; pass cluster=<the Cluster the objects live in>"
        )
    return [(cluster, frozenset(target_of(item) for item in items))] if items else []
