"""A pytest plugin loaded into a docs page's child session (``-p docs_child_progress``): when the
page's tests have run and the session goes on to wait for its test namespaces' deletion, it
writes how the tests went to the file ``$DOCS_CHILD_PROGRESS`` names (JSON).

That wait is about 5 s per child (kube-controller-manager's namespace controller waits a fixed
5 s before it empties a deleted namespace): idle time the docs session overlaps with its next
pages (``docs_runner.PageRun``). The child still waits, reports and exits as before, and its
exit status and output are still checked, before the docs session's warm plane stops.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ktest.plugin import session as ktest_session

PROGRESS_ENV = "DOCS_CHILD_PROGRESS"


class _Progress:
    """The outcome of each test so far, as pytest's summary counts them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.collected = 0
        self.outcomes: dict[str, str] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = len(session.items)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        known = self.outcomes.get(report.nodeid)
        if report.failed:  # an error in any phase fails the test
            self.outcomes[report.nodeid] = "failed"
        elif report.skipped and known != "failed":
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and known is None:
            self.outcomes[report.nodeid] = "passed"

    def write(self, cluster: str | None) -> None:
        counts: dict[str, int] = {}
        for outcome in self.outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps({"collected": self.collected, "outcomes": counts, "cluster": cluster}))
        partial.replace(self.path)  # the docs session never reads half a file


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return
    progress = _Progress(Path(path))
    config.pluginmanager.register(progress, "docs_child_progress_state")
    finish_deletions = ktest_session.KtestSession.finish_deletions

    def write_progress_then_finish_deletions(self: ktest_session.KtestSession) -> None:
        if self.config is config:
            progress.write(self.describe_cluster())
        finish_deletions(self)

    patch = pytest.MonkeyPatch()
    patch.setattr(ktest_session.KtestSession, "finish_deletions", write_progress_then_finish_deletions)
    config.add_cleanup(patch.undo)
