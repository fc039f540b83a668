"""pytest plugin (``pytest -p ktest_junit``): ktest's failure-report sections into the JUnit XML.

ktest adds ``ktest: ...`` sections to a failing test's report (the namespace's
objects and events, the operator's log tail); pytest's JUnit writer keeps only
captured output. This copies those sections into the test case's
``<properties>`` so ``summary.py`` can show them in the job summary.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

SECTION_PREFIX = "ktest: "


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: runs after ktest's plugin added its sections
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, Any]:
    report: pytest.TestReport = yield
    if report.failed:
        sections = [(title, text) for title, text in report.sections if title.startswith(SECTION_PREFIX)]
        item.user_properties.extend(sections)
        if report.when == "teardown":  # the JUnit writer reads the teardown report's copy
            report.user_properties.extend(sections)
    return report
