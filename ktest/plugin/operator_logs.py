"""Each line of an in-process operator's log once in a failing test's report.

The operator's ``logging`` records go to its own log, shown in ktest's "operator <name> log"
section (with ``print()`` output and kopf's object names); pytest's "Captured log" sections
leave them out. ``caplog`` and live logging (``--log-cli-level``) still receive them.
"""

from __future__ import annotations

import logging

import pytest


class _NotOperatorRecords(logging.Filter):
    """Lets through the records of code that is not an in-process operator's."""

    def filter(self, record: logging.LogRecord) -> bool:
        from ktest.operators.logs import current_sink

        return current_sink() is None


def leave_operator_records_to_ktest(config: pytest.Config) -> None:
    """Keep operators' records out of pytest's report capture (its "Captured log" sections)."""
    logging_plugin = config.pluginmanager.get_plugin("logging-plugin")
    handler = getattr(logging_plugin, "report_handler", None)
    if isinstance(handler, logging.Handler) and not any(
        isinstance(existing, _NotOperatorRecords) for existing in handler.filters
    ):
        handler.addFilter(_NotOperatorRecords())
