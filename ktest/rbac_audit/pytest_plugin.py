"""``ktest_rbac = path``: the session's operator requests judged against the operator's shipped
roles (:mod:`ktest.rbac_audit`). Every process records; xdist workers write their part to the
directory the controller names; the controller merges, writes ``<artifacts>/rbac/requests.json``
and ``derived-rules.yaml``, and fails the session on a missing rule."""

from __future__ import annotations

import shutil
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ktest.config import Settings
    from ktest.rbac_audit.compare import ShippedRule
    from ktest.rbac_audit.session import SessionVerdict

DIRECTORY_KEY = "ktest_rbac_directory"


class RbacCheck:
    """The session's RBAC audit, registered as a pytest plugin when ``ktest_rbac`` is set."""

    def __init__(self, directory: Path, worker: str, rules: list[ShippedRule] | None) -> None:
        from ktest.rbac_audit.session import SessionRecorder

        self.directory = directory
        self.worker = worker
        self.rules = rules
        """The shipped rules (None in an xdist worker: the controller judges)."""
        self.recorder = SessionRecorder()
        self.verdict: SessionVerdict | None = None

    @classmethod
    def start(cls, config: pytest.Config, settings: Settings, artifacts: Path) -> RbacCheck:
        """Workers record into the controller's directory; the controller (or a run without xdist)
        reads the shipped roles first, so a manifest that does not parse stops the run at once."""
        from ktest.errors import KtestError
        from ktest.rbac_audit.compare import shipped_rules
        from ktest.rbac_audit.session import PARTS_DIRECTORY

        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None:
            return cls(Path(workerinput[DIRECTORY_KEY]), str(workerinput["workerid"]), None)
        assert settings.rbac is not None
        try:
            rules = shipped_rules(settings.rbac)
        except KtestError as error:
            raise pytest.UsageError(f"ktest: {settings.source_of('rbac')}: {error}") from None
        from ktest.plugin.artifacts import prepare

        directory = prepare(artifacts, artifacts / "rbac")
        shutil.rmtree(directory / PARTS_DIRECTORY, ignore_errors=True)  # an earlier session's parts
        return cls(directory, "main", rules)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[DIRECTORY_KEY] = str(self.directory)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        self.recorder.test = item.nodeid

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, Any, Any]:
        """After every other part of the session's end (session-scoped operators stop there)."""
        from ktest.rbac_audit.session import PARTS_DIRECTORY, judge

        result = yield
        self.recorder.finish(self.directory / PARTS_DIRECTORY / f"{self.worker}.json")
        if self.rules is not None:
            self.verdict = judge(self.directory, self.rules)
            if not self.verdict.comparison.ok and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return result

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.verdict is None:
            return
        failed = not self.verdict.comparison.ok
        terminalreporter.write_sep("-", "ktest rbac: FAILED" if failed else "ktest rbac")
        for line in self.verdict.describe().splitlines():
            terminalreporter.write_line(line, red=failed and line.lstrip().startswith(("missing", "add")))


def register(config: pytest.Config, name: str) -> None:
    """Audit the session's requests when ``ktest_rbac`` is set and the settings resolved (called by the
    core's plugin, by name: ``ktest.addon_registry``)."""
    from ktest.plugin.session import SESSION_KEY

    session = config.stash[SESSION_KEY]
    if session.settings_error is None and session.settings.rbac is not None:
        config.pluginmanager.register(RbacCheck.start(config, session.settings, session.artifacts), name)
