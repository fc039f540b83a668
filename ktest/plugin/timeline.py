"""The pytest side of failure timelines (:mod:`ktest.timeline`): record each test that uses the
``cluster`` fixture, write the page of a failing one (setting ``ktest_timeline``: off, on-failure,
always) to ``<artifacts>/timelines/``, and say where it is: the failing test's report, the JUnit
report (``<property name="ktest_timeline" value="...">``), the terminal summary.

Nothing here can change a test's result: a page that cannot be written is reported (terminal
summary, JUnit property ``ktest_timeline_error``) and the run goes on. A test interrupted mid-way
gets a partial page that says where the recording stops. Under pytest-xdist every worker writes
its own tests' pages; the summary, in the controller, reads them from the reports.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ktest.plugin.session import SESSION_KEY

if TYPE_CHECKING:  # the recorder (and the cluster client under it) loads only once a test records
    from ktest.timeline import Recorder

PROPERTY = "ktest_timeline"
ERROR_PROPERTY = "ktest_timeline_error"
_RECORDER = pytest.StashKey["Recorder"]()
_FAILED = pytest.StashKey[bool]()


def _mode(config: pytest.Config) -> str:
    session = config.stash.get(SESSION_KEY, None)
    return session.settings.timeline if session is not None else "off"


def timeline_directory(config: pytest.Config) -> Path:
    """``<artifacts>/timelines``: the artifacts setting, else ``.ktest-artifacts`` in the rootdir."""
    session = config.stash.get(SESSION_KEY, None)
    artifacts = session.settings.artifacts_dir if session is not None else None
    return (artifacts or config.rootpath / ".ktest-artifacts") / "timelines"


def page_name(nodeid: str) -> str:
    """A file name for a test's page: its node id made safe, short, and unique."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid).strip("_.") or "test"
    if len(safe) > 120:
        safe = safe[:100] + "-" + hashlib.sha256(nodeid.encode()).hexdigest()[:12]
    return safe + ".html"


def _cluster_of(item: pytest.Item) -> Any:
    """The session's cluster if the test uses it and it exists already (never created here)."""
    if "cluster" not in getattr(item, "fixturenames", ()):
        return None
    definitions = getattr(item, "_fixtureinfo", None)
    for definition in definitions.name2fixturedefs.get("cluster", ()) if definitions else ():
        cached = getattr(definition, "cached_result", None)
        if cached is not None and cached[2] is None:
            return cached[0]
    return None


def _start(item: pytest.Item) -> None:
    cluster = _cluster_of(item)
    if cluster is None or _RECORDER in item.stash:
        return
    from ktest.timeline import Recorder

    item.stash[_RECORDER] = Recorder(cluster, test=item.nodeid).start()


class TimelinePlugin:
    """Registered once per pytest session (``config.pluginmanager``); holds what the summary lists."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.written: list[tuple[str, str]] = []
        self.unwritten: list[tuple[str, str]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        if _mode(item.config) == "off":
            return (yield)
        _start(item)  # the cluster exists already: the setup's writes are recorded too
        try:
            return (yield)
        finally:
            _start(item)  # the first test: its setup made the cluster

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, Any]:
        try:
            return (yield)
        except BaseException as error:  # interrupted (KeyboardInterrupt, exit): keep what was recorded
            recorder = item.stash.get(_RECORDER, None)
            if recorder is not None and recorder.stopped is None:
                recorder.cut(f"the test was interrupted ({type(error).__name__}) before it ended")
                recorder.stop("interrupted")
                del item.stash[_RECORDER]
                self._write(item, recorder, [])
            raise

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[Any]
    ) -> Generator[None, Any, Any]:
        report: pytest.TestReport = yield
        recorder = item.stash.get(_RECORDER, None)
        if recorder is None:
            return report
        if report.failed and not item.stash.get(_FAILED, False):
            item.stash[_FAILED] = True
            message = call.excinfo.exconly() if call.excinfo is not None else report.longreprtext
            recorder.fail(message, at=recorder.started + (call.stop - recorder.started_wall))
            path = timeline_directory(item.config) / page_name(item.nodeid)
            report.sections.append(("ktest: timeline", f"written after the teardown to {path}"))
        if report.when == "teardown":
            failed = item.stash.get(_FAILED, False)
            keep = _mode(item.config) == "always" or failed
            recorder.stop("failed" if failed else "passed", settle=keep)
            del item.stash[_RECORDER]  # items live as long as the session: free what was recorded
            if keep:
                self._write(item, recorder, report.user_properties)
        return report

    def _write(self, item: pytest.Item, recorder: Recorder, properties: list[tuple[str, object]]) -> None:
        path = timeline_directory(item.config) / page_name(item.nodeid)
        try:
            written = recorder.write(path)
        except Exception as error:  # an unwritable directory must not change the test's result
            text = f"could not write the timeline of {item.nodeid} to {path}: {type(error).__name__}: {error}"
            properties.append((ERROR_PROPERTY, text))
            item.user_properties.append((ERROR_PROPERTY, text))
            return
        properties.append((PROPERTY, str(written)))
        item.user_properties.append((PROPERTY, str(written)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Collect the pages written (here, or in an xdist worker: the report carries them)."""
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name == PROPERTY:
                self.written.append((report.nodeid, str(value)))
            elif name == ERROR_PROPERTY:
                self.unwritten.append((report.nodeid, str(value)))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.written and not self.unwritten:
            return
        terminalreporter.section("ktest timelines")
        for nodeid, path in self.written:
            terminalreporter.write_line(f"{nodeid}: {path}")
        for _, text in self.unwritten:
            terminalreporter.write_line(f"ktest: {text}")
