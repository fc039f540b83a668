"""Fixtures of the timeline's browser tests: an offline headless Chromium page, and the timelines
of real failing operator tests (``failing_suite/``, run once per session in an inner pytest).

Every browser test runs in the xdist group ``browser`` (one worker), so this busy machine runs one
browser at a time; each test launches its own browser and closes it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from timeline_browser import BrowserMissing, TimelinePage, timeline_page

ROOT = Path(__file__).resolve().parents[3]
FAILING_SUITE = Path(__file__).resolve().parent / "failing_suite"
# The inner suite is run by ``failing_timelines`` only, never collected by the outer run.
collect_ignore = ["failing_suite"]
INNER_RUN_TIMEOUT = 540


@pytest.fixture
def browser() -> Iterator[TimelinePage]:
    """One offline page of a fresh headless Chromium (closed after the test).

    A missing Chromium or Playwright fails the test (never skips) and says how to install it."""
    try:
        with timeline_page() as page:
            yield page
    except BrowserMissing as missing:
        pytest.fail(str(missing), pytrace=False)


@dataclass(frozen=True)
class InnerRun:
    """What the inner session left: each failing test's timeline file, its output and results."""

    timelines: dict[str, Path]
    outcomes: dict[str, str]
    output: str

    def timeline(self, test: str) -> Path:
        assert self.outcomes.get(test) == "failed", (
            f"the inner test {test} should fail (outcome {self.outcomes.get(test)!r}):\n{self.output[-6000:]}"
        )
        assert test in self.timelines, (
            f"the failing inner test {test} has no `ktest_timeline` JUnit property (timelines: "
            f"{sorted(self.timelines)}); output:\n{self.output[-6000:]}"
        )
        path = self.timelines[test]
        assert path.is_file(), f"{test}'s timeline {path} (JUnit property ktest_timeline) does not exist"
        return path


def inner_environment(state: Path, binary_cache: Path) -> dict[str, str]:
    """The environment of the inner run (as tests/conftest.py's ``inner_env``): the real binary
    cache, a private state directory, none of the outer run's other KTEST_* settings."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("KTEST_", "PYTEST_")) or name in ("KTEST_CACHE_DIR", "KTEST_ASSETS")
    }
    environment.update(
        KTEST_CACHE_DIR=os.environ.get("KTEST_CACHE_DIR") or str(binary_cache),
        XDG_STATE_HOME=str(state),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    return environment


def read_junit(path: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """Outcome per test name, and the ``ktest_timeline`` property of each test that has one."""
    outcomes: dict[str, str] = {}
    timelines: dict[str, Path] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        tags = {child.tag for child in case}
        outcome = "failed" if "failure" in tags else "error" if "error" in tags else "passed"
        if outcomes.get(name, "passed") == "passed":
            outcomes[name] = outcome
        for prop in case.iter("property"):
            if prop.get("name") == "ktest_timeline":
                timelines[name] = Path(prop.get("value", ""))
    return outcomes, timelines


@pytest.fixture(scope="session")
def failing_timelines(tmp_path_factory: pytest.TempPathFactory, binary_cache: Path) -> InnerRun:
    """Run ``failing_suite/`` once with ``--ktest-timeline on-failure``; its timelines."""
    base = tmp_path_factory.mktemp("failing-suite")
    suite = base / "suite"
    shutil.copytree(FAILING_SUITE, suite, ignore=shutil.ignore_patterns("__pycache__"))
    junit = base / "junit.xml"
    command = [
        sys.executable, "-m", "pytest", str(suite), "--rootdir", str(suite), "-p", "no:cacheprovider",
        "-W", "ignore::DeprecationWarning", f"--junitxml={junit}", "-o", "junit_family=xunit1",
        "--ktest-timeline", "on-failure", "--ktest-artifacts", str(base / "artifacts"),
    ]
    completed = subprocess.run(
        command, cwd=suite, env=inner_environment(base / "state", binary_cache), capture_output=True,
        text=True, timeout=INNER_RUN_TIMEOUT, check=False,
    )
    output = completed.stdout + completed.stderr
    assert junit.is_file(), (
        f"the inner run wrote no JUnit report (exit {completed.returncode}):\n{output[-6000:]}"
    )
    outcomes, timelines = read_junit(junit)
    return InnerRun({name: suite / path for name, path in timelines.items()}, outcomes, output)
