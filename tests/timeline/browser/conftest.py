"""Fixtures of the timeline's browser tests: an offline headless Chromium page, and the timelines
of real failing operator tests (``failing_suite/``, run once per session in an inner pytest).

Every browser test runs in the xdist group ``browser`` (one worker), so this busy machine runs one
browser at a time; each test launches its own browser and closes it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from timeline_browser import TimelinePage, chromium_path, missing_browser, timeline_page
from timeline_runs import InnerRun, inner_environment, read_junit
from warm_planes import WarmPlane

FAILING_SUITE = Path(__file__).resolve().parent / "failing_suite"
# The inner suite is run by ``failing_timelines`` only, never collected by the outer run.
collect_ignore = ["failing_suite"]
INNER_RUN_TIMEOUT = 540


@pytest.fixture
def browser() -> Iterator[TimelinePage]:
    """One offline page of a fresh headless Chromium (closed after the test).

    A missing Chromium or Playwright fails the test (never skips) and says how to install it."""
    problem = missing_browser(chromium_path())
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    with timeline_page() as page:
        yield page


@pytest.fixture(scope="session")
def failing_timelines(
    tmp_path_factory: pytest.TempPathFactory, binary_cache: Path, inner_warm_plane: WarmPlane
) -> InnerRun:
    """Run ``failing_suite/`` once with ``--ktest-timeline on-failure``; its timelines. It attaches
    to the worker's warm plane, as a user's run attaches to ``ktest up``: its tests' timelines are
    of their operators and objects, which any plane shows alike."""
    base = tmp_path_factory.mktemp("failing-suite")
    suite = base / "suite"
    shutil.copytree(FAILING_SUITE, suite, ignore=shutil.ignore_patterns("__pycache__"))
    junit = base / "junit.xml"
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(suite),
        "--rootdir",
        str(suite),
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::DeprecationWarning",
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit1",
        "--ktest-timeline",
        "on-failure",
        "--ktest-artifacts",
        str(base / "artifacts"),
    ]
    completed = subprocess.run(
        command,
        cwd=suite,
        env={**inner_environment(base / "state", binary_cache), **inner_warm_plane.env},
        capture_output=True,
        text=True,
        timeout=INNER_RUN_TIMEOUT,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert junit.is_file(), (
        f"the inner run wrote no JUnit report (exit {completed.returncode}):\n{output[-6000:]}"
    )
    assert f"cluster: {inner_warm_plane.attached_header}" in output, (
        f"the inner run did not attach to the worker's warm plane:\n{output[-3000:]}"
    )
    outcomes, timelines = read_junit(junit)
    return InnerRun({name: suite / path for name, path in timelines.items()}, outcomes, output)
