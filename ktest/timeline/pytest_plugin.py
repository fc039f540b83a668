"""The pytest side of failure timelines (:mod:`ktest.timeline`): record each test that uses a
control plane (the ``cluster`` fixture, or a plane of its own: a fixture whose value is a
:class:`ktest.Cluster` or has one as ``.cluster``, like ``control_plane_upgrade``), write the
page of a failing one (setting ``ktest_timeline``: off, on-failure, always) to
``<artifacts>/timelines/``, and say where it is: the failing test's report, the JUnit report
(``<property name="ktest_timeline" value="...">``), the terminal summary.

Nothing here can change a test's result: a page that cannot be written is reported (terminal
summary, JUnit property ``ktest_timeline_error``) and the run goes on. A test interrupted mid-way
gets a partial page that says where the recording stops. The recorded plane stopping in the
test's teardown (the session's last test, a plane of the test's own) ends the API server's view
there, not the recording. An upgrade of a plane of the test's own (the fixture value's
``.report``) is on the page. Under pytest-xdist every worker writes
its own tests' pages; the summary, in the controller, reads them from the reports.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Generator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ktest.base.bounded import future_result
from ktest.errors import KtestError
from ktest.plugin.artifacts import artifacts_root, prepare, safe_name
from ktest.plugin.session import SESSION_KEY

if TYPE_CHECKING:  # the recorder (and the cluster client under it) loads only once a test records
    from ktest.timeline import Recorder

PROPERTY = "ktest_timeline"
PAGE_TIMEOUT = 300.0
"""Seconds the end of a run waits for one timeline page to be written."""
ERROR_PROPERTY = "ktest_timeline_error"
_RECORDER = pytest.StashKey["Recorder"]()
_PLANE = pytest.StashKey[Any]()
"""The value of the fixture the recorded cluster came from (its ``.report``: an upgrade)."""
_FAILED = pytest.StashKey[bool]()


def _mode(config: pytest.Config) -> str:
    session = config.stash.get(SESSION_KEY, None)
    return session.settings.timeline if session is not None else "off"


def page_path(item: pytest.Item) -> Path:
    """``<artifacts>/timelines/<node id>.html`` (artifacts: the setting, else ``.ktest-artifacts`` in
    the rootdir; the node id made safe, short, and unique)."""
    return _artifacts(item.config) / "timelines" / page_name(item.nodeid)


def _artifacts(config: pytest.Config) -> Path:
    session = config.stash.get(SESSION_KEY, None)
    return artifacts_root(session.settings.artifacts_dir if session is not None else None, config.rootpath)


def page_name(nodeid: str) -> str:
    """``nodeid``'s page: its safe, unique file name (:func:`~ktest.plugin.artifacts.safe_name`)."""
    return f"{safe_name(nodeid)}.html"



def _add_property(item: pytest.Item, name: str, value: str, report: pytest.TestReport | None = None) -> None:
    """A JUnit property of the test (and of ``report``, made from it already)."""
    item.user_properties.append((name, value))
    if report is not None:
        report.user_properties.append((name, value))


def _cluster_in(value: Any) -> Any:
    """``value`` if it is a :class:`ktest.Cluster`, else its ``.cluster`` if that is one, else None."""
    module = sys.modules.get("ktest.cluster")  # not loaded: no fixture value can be a Cluster
    if module is None:
        return None
    if isinstance(value, module.Cluster):
        return value
    inner = getattr(value, "cluster", None)
    return inner if isinstance(inner, module.Cluster) else None


def _plane_of(item: pytest.Item) -> tuple[Any, Any, Any]:
    """(cluster, fixture definition, fixture value) of the plane the test uses, if set up already
    (never created here): the session's ``cluster``, else the first fixture whose value is a
    Cluster or holds one as ``.cluster`` (a plane of the test's own)."""
    definitions = getattr(item, "_fixtureinfo", None)
    if definitions is None:
        return None, None, None
    names = list(getattr(item, "fixturenames", ()))
    if "cluster" in names:
        names = ["cluster"]
    for name in names:
        for definition in reversed(definitions.name2fixturedefs.get(name, ())):
            cached = getattr(definition, "cached_result", None)
            if cached is None or cached[2] is not None:
                continue
            cluster = _cluster_in(cached[0])
            if cluster is not None:
                return cluster, definition, cached[0]
    return None, None, None


def _start(item: pytest.Item, plugin: TimelinePlugin) -> None:
    if _RECORDER in item.stash:
        return
    cluster, definition, value = _plane_of(item)
    if cluster is None:
        return
    from ktest.timeline import Recorder

    recorder = item.stash[_RECORDER] = Recorder(cluster, test=item.nodeid).start()
    item.stash[_PLANE] = value
    plugin.watch_plane_stop(definition, recorder)


def _note_upgrade(item: pytest.Item, recorder: Recorder) -> None:
    report = getattr(item.stash.get(_PLANE, None), "report", None)
    if report is not None and hasattr(report, "started") and hasattr(report, "to_version"):
        recorder.note_upgrade(report)


class TimelinePlugin:
    """Registered once per pytest session (``config.pluginmanager``); holds what the summary lists."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.written: list[tuple[str, str]] = []
        self.unwritten: list[tuple[str, str]] = []
        self._recording: Recorder | None = None
        self._planes_watched: set[int] = set()
        self._writer: ThreadPoolExecutor | None = None
        self._pages: list[Future[None]] = []

    def watch_plane_stop(self, definition: Any, recorder: Recorder) -> None:
        """Before the recorded plane's fixture is torn down, end the recording's watches: a plane
        stopping in the test's teardown is not a recording cut short."""
        self._recording = recorder
        if id(definition) in self._planes_watched:
            return
        self._planes_watched.add(id(definition))

        def plane_stops() -> None:  # runs before the fixture's own teardown (finalizers: last in, first out)
            self._planes_watched.discard(id(definition))
            self.finish_pages()  # their watches settle on this plane
            recording = self._recording
            if recording is not None and recording.stopped is None:
                recording.end_watches()

        definition.addfinalizer(plane_stops)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        if _mode(item.config) == "off":
            return (yield)
        _start(item, self)  # the cluster exists already: the setup's writes are recorded too
        try:
            return (yield)
        finally:
            _start(item, self)  # the first test: its setup made the cluster

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
                self._write(item, recorder)
            raise

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[Any]
    ) -> Generator[None, Any, Any]:
        report: pytest.TestReport = yield
        recorder = item.stash.get(_RECORDER, None)
        if recorder is None:
            return report
        _note_upgrade(item, recorder)
        if report.failed and not item.stash.get(_FAILED, False):
            item.stash[_FAILED] = True
            message = call.excinfo.exconly() if call.excinfo is not None else report.longreprtext
            recorder.fail(message, at=recorder.started + (call.stop - recorder.started_wall))
            path = page_path(item)
            report.sections.append(("ktest: timeline", f"written after the teardown to {path}"))
        if report.when == "teardown":
            failed = item.stash.get(_FAILED, False)
            keep = _mode(item.config) == "always" or failed
            recorder.end("failed" if failed else "passed", keep=keep)
            del item.stash[_RECORDER]  # items live as long as the session: free what was recorded
            item.stash[_PLANE] = None
            self._recording = None
            if keep:
                self._write_later(item, recorder, report)
            else:
                recorder.close(settle=False)
        return report

    def _write_later(self, item: pytest.Item, recorder: Recorder, report: pytest.TestReport) -> None:
        """Write the page on a thread of its own: the watches' settling and the page's building
        overlap the next test instead of lengthening this one. Whether the directory takes a
        file is checked here, so that an unwritable one is in this test's report."""
        path = page_path(item)
        try:
            prepare(_artifacts(item.config), path.parent)
            with tempfile.TemporaryFile(dir=path.parent):
                pass
        except Exception as error:
            recorder.close(settle=False)
            self._report_unwritten(item, path, error, report)
            return
        _add_property(item, PROPERTY, str(path), report)
        if self._writer is None:
            self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ktest-timeline-page")
        self._pages.append(self._writer.submit(self._close_and_write, item.nodeid, recorder, path))

    def _close_and_write(self, nodeid: str, recorder: Recorder, path: Path) -> None:
        try:
            recorder.close()
            recorder.write(path)
        except Exception as error:  # reported at the end of the run: the test's report has gone
            text = f"could not write the timeline of {nodeid} to {path}: {type(error).__name__}: {error}"
            self.unwritten.append((nodeid, text))
            print(f"ktest: {text}", file=sys.stderr)

    def finish_pages(self) -> None:
        """Wait for the pages being written (before their plane stops, and at the end of the run)."""
        pages, self._pages = self._pages, []
        for page in pages:
            future_result(page, PAGE_TIMEOUT, "a timeline page to be written", KtestError)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.finish_pages()
        if self._writer is not None:
            self._writer.shutdown()
            self._writer = None

    def _write(self, item: pytest.Item, recorder: Recorder) -> None:
        path = page_path(item)
        try:
            prepare(_artifacts(item.config), path.parent)
            written = recorder.write(path)
        except Exception as error:  # an unwritable directory must not change the test's result
            self._report_unwritten(item, path, error)
            return
        _add_property(item, PROPERTY, str(written))

    @staticmethod
    def _report_unwritten(
        item: pytest.Item, path: Path, error: Exception, report: pytest.TestReport | None = None
    ) -> None:
        text = f"could not write the timeline of {item.nodeid} to {path}: {type(error).__name__}: {error}"
        _add_property(item, ERROR_PROPERTY, text, report)

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


def register(config: pytest.Config, name: str) -> None:
    """Record the session's tests (called by the core's plugin, by name: ``ktest.addon_registry``)."""
    config.pluginmanager.register(TimelinePlugin(config), name)
