"""An operator's part in the reports of failing tests: its log and its API calls.

Started inside a test, its whole log (and every call it made) belongs to that test; a
session-scoped operator attaches to each failing test what it wrote and called during it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ktest import run_context
from ktest.operators.logs import OperatorLog
from ktest.proxy.call_report import describe_calls

if TYPE_CHECKING:
    from ktest.proxy import OperatorProxy


def attach_reports(name: str, log: OperatorLog, proxy: OperatorProxy | None) -> Callable[[], None] | None:
    """Attach operator ``name``'s log and ``proxy``'s calls to the current run's reports; the
    clean-up to call when the operator leaves the run, or None when the test's end removes them."""
    current = run_context.current()
    if current is not None and any(scope.is_test for scope in current.chain()):
        run_context.add_report_section(f"operator {name} log", lambda: log.since(0))
        if proxy is not None:
            run_context.add_report_section(f"operator {name} API calls", _calls_since(proxy, 0))
        return None

    def on_test_start(test_context: run_context.RunContext) -> None:
        mark = log.mark()
        test_context.sections.append((f"operator {name} log during this test", lambda: log.since(mark)))
        if proxy is not None:
            test_context.sections.append(
                (f"operator {name} API calls during this test", _calls_since(proxy, proxy.traffic.mark()))
            )

    return run_context.on_each_test(on_test_start)


def _calls_since(proxy: OperatorProxy, mark: int) -> Callable[[], str]:
    return lambda: describe_calls(proxy.traffic, since=mark)
