"""The pytest side of timelines, in inner sessions on the real control plane: a page for each
failing test by default (none for a passing one), always/off, the JUnit property, the terminal
summary, the failing test's report; an unwritable directory and an interrupted test.

The inner sessions run in this process (``runpytest_inprocess``): a child process each would only
add an interpreter's start; the interrupted one and the one with xdist workers run in a child, as a
user's would (a KeyboardInterrupt would end this worker too)."""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

TESTS = """
from ktest.wait import eventually


def test_passes(cluster, namespace):
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok"}}, namespace=namespace)


def test_fails(cluster, namespace):
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": "1"}},
                   namespace=namespace)
    eventually(lambda: cluster.get(("v1", "ConfigMap", "c", namespace))["data"]["n"] == "2", timeout=0.3)
"""

INTERRUPTED = """
def test_interrupted(cluster, namespace):
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, namespace=namespace)
    raise KeyboardInterrupt
"""


def page_data(path: Path) -> dict[str, Any]:
    found = re.search(r'id="ktest-timeline-data">(.*?)</script>', path.read_text(), re.S)
    assert found is not None, f"no embedded data in {path}"
    return dict(json.loads(found.group(1)))


def timelines(directory: Path) -> list[str]:
    return (
        sorted(path.name for path in (directory / "timelines").glob("*.html")) if directory.exists() else []
    )


def test_by_default_only_the_failing_test_gets_a_page_named_everywhere(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    pytester.makepyfile(test_inner=TESTS)
    artifacts = pytester.path / "artifacts"
    result = pytester.runpytest_inprocess(f"--ktest-artifacts={artifacts}", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    assert timelines(artifacts) == ["test_inner.py_test_fails.html"]
    page = artifacts / "timelines" / "test_inner.py_test_fails.html"
    data = page_data(page)
    assert data["test"] == "test_inner.py::test_fails" and data["outcome"] == "failed"
    assert "did not pass within 0.3s" in data["failure"]["message"]
    assert [e["kind"] for e in data["events"] if e["kind"] == "assertion-failure"] == ["assertion-failure"]
    assert any(
        e["lane"] == "apiserver" and e["detail"]["type"] == "ADDED"
        for e in data["events"]
        if e["kind"] == "watch-event"
    )
    result.stdout.fnmatch_lines(
        [
            "*- ktest: timeline -*",
            f"written after the teardown to {page}",
            "*= ktest timelines =*",
            f"test_inner.py::test_fails: {page}",
        ]
    )
    cases = {
        case.get("name"): case for case in ElementTree.parse(pytester.path / "junit.xml").iter("testcase")
    }
    properties = {p.get("name"): p.get("value") for p in cases["test_fails"].iter("property")}
    assert properties == {"ktest_timeline": str(page)}
    assert list(cases["test_passes"].iter("property")) == []


def test_always_writes_every_test_and_off_none(pytester: pytest.Pytester, inner_env: dict[str, str]) -> None:
    pytester.makepyfile(test_inner=TESTS)
    pytester.makeini("[pytest]\nktest_timeline = always\n")
    always = pytester.path / "always"
    pytester.runpytest_inprocess(f"--ktest-artifacts={always}").assert_outcomes(passed=1, failed=1)
    assert timelines(always) == ["test_inner.py_test_fails.html", "test_inner.py_test_passes.html"]
    assert page_data(always / "timelines" / "test_inner.py_test_passes.html")["outcome"] == "passed"
    off = pytester.path / "off"
    result = pytester.runpytest_inprocess(f"--ktest-artifacts={off}", "--ktest-timeline=off")
    result.assert_outcomes(passed=1, failed=1)
    assert timelines(off) == []
    assert "ktest timelines" not in result.stdout.str()


def test_an_unwritable_directory_is_reported_and_changes_no_result(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    pytester.makepyfile(test_inner=TESTS)
    blocker = pytester.path / "artifacts"
    blocker.write_text("a file where the directory should be")
    result = pytester.runpytest_inprocess(f"--ktest-artifacts={blocker}", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*= ktest timelines =*",
            f"ktest: could not write the timeline of test_inner.py::test_fails to {blocker}/timelines/"
            "test_inner.py_test_fails.html: *Error: *",
        ]
    )
    (case,) = [
        c
        for c in ElementTree.parse(pytester.path / "junit.xml").iter("testcase")
        if c.get("name") == "test_fails"
    ]
    assert [p.get("name") for p in case.iter("property")] == ["ktest_timeline_error"]


def test_an_interrupted_test_leaves_a_partial_page_that_says_where_it_stops(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    pytester.makepyfile(test_inner=INTERRUPTED)
    artifacts = pytester.path / "artifacts"
    result = pytester.runpytest_subprocess(f"--ktest-artifacts={artifacts}")  # the interrupt ends the process
    assert result.ret == pytest.ExitCode.INTERRUPTED
    data = page_data(artifacts / "timelines" / "test_inner.py_test_interrupted.html")
    assert data["outcome"] == "interrupted"
    assert data["truncated"]["reason"] == "the test was interrupted (KeyboardInterrupt) before it ended"
    assert data["truncated"]["at"] > 0
    assert any(e["kind"] == "request" and e["detail"]["method"] == "POST" for e in data["events"])


def test_xdist_workers_write_their_tests_pages_and_the_controller_lists_them(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    pytester.makepyfile(
        test_inner=TESTS.replace("def test_passes(", "def test_fails_too(").replace(
            '"metadata": {"name": "ok"}}, namespace=namespace)',
            '"metadata": {"name": "ok"}}, namespace=namespace)\n    assert False, \'on purpose\'',
        )
    )
    artifacts = pytester.path / "artifacts"
    result = pytester.runpytest_subprocess("-n", "2", f"--ktest-artifacts={artifacts}")
    result.assert_outcomes(failed=2)
    assert timelines(artifacts) == ["test_inner.py_test_fails.html", "test_inner.py_test_fails_too.html"]
    summary = result.stdout.str().split("ktest timelines", 1)[1]
    pages = artifacts / "timelines"
    assert f"test_inner.py::test_fails: {pages / 'test_inner.py_test_fails.html'}" in summary
    assert f"test_inner.py::test_fails_too: {pages / 'test_inner.py_test_fails_too.html'}" in summary


def test_the_artifacts_directory_ignores_itself_in_git(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    pytester.makepyfile(test_inner=TESTS)
    subprocess.run(["git", "init", "-q", str(pytester.path)], check=True)
    result = pytester.runpytest_inprocess("-k", "test_fails")
    result.assert_outcomes(failed=1)
    artifacts = pytester.path / ".ktest-artifacts"
    assert timelines(artifacts) == ["test_inner.py_test_fails.html"]
    assert (artifacts / ".gitignore").read_text().splitlines()[-1] == "*"
    untracked = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=pytester.path, capture_output=True,
        text=True, check=True,
    ).stdout
    assert ".ktest-artifacts" not in untracked and "test_inner.py" in untracked, untracked

    # A directory the user named: one ktest makes ignores itself, one that was there is left alone.
    made = pytester.path / "made-by-ktest"
    pytester.runpytest_inprocess("-k", "test_fails", f"--ktest-artifacts={made}").assert_outcomes(failed=1)
    assert (made / ".gitignore").is_file()
    theirs = pytester.mkdir("theirs")
    pytester.runpytest_inprocess("-k", "test_fails", f"--ktest-artifacts={theirs}").assert_outcomes(failed=1)
    assert timelines(theirs) == ["test_inner.py_test_fails.html"] and not (theirs / ".gitignore").exists()
