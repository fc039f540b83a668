"""JUnit XML with ktest's report sections (scripts/ci/pytest_plugin/ktest_junit.py), the job
summary written from it (scripts/ci/summary.py), and the workflow's run-pytest/report scripts."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import summary
from ci_helpers import SCRIPTS, run_script
from gha import CIError

SUITE = """
import ktest.run_context
import pytest


def test_passes():
    pass


def test_widget_gets_ready():
    ktest.run_context.add_report_section(
        "operator widget-operator log", lambda: "\\n".join(f"log line {i}" for i in range(100))
    )
    assert 1 == 2, "widget w1 never became Ready | status {}"


@pytest.fixture
def broken_teardown():
    yield
    raise RuntimeError("namespace stuck in Terminating")


def test_teardown_breaks(broken_teardown):
    pass


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""


def inner_pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A real pytest session in this process: a child's cost without a fresh interpreter, which
    these suites do not need (the plugin is found on ``sys.path`` as on ``PYTHONPATH``)."""
    return pytester.runpytest_inprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-o", "asyncio_default_fixture_loop_scope=function",
        *args,
    )


def run_suite(pytester: pytest.Pytester, junit: Path, *, with_plugin: bool = True) -> None:
    """Run SUITE (:func:`inner_pytest`), writing ``junit``; with the ktest_junit plugin (JUnit
    family xunit1, whose <property> elements carry the sections) unless ``with_plugin`` is False."""
    pytester.makepyfile(test_suite=SUITE)
    plugin = ["-p", "ktest_junit", "-o", "junit_family=xunit1"] if with_plugin else []
    if with_plugin:
        pytester.syspathinsert(SCRIPTS / "pytest_plugin")
    done = inner_pytest(pytester, *plugin, "--junitxml", str(junit), "test_suite.py")
    assert done.ret == 1, done.stdout.str() + done.stderr.str()  # the suite fails on purpose


def test_ktest_sections_reach_the_junit_xml(pytester: pytest.Pytester) -> None:
    junit = pytester.path / "junit-1.37-bare.xml"
    run_suite(pytester, junit)
    cases = {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}
    properties = {p.get("name"): p.get("value") for p in cases["test_widget_gets_ready"].iter("property")}
    log = properties["ktest: operator widget-operator log"]
    assert log.splitlines()[0] == "log line 0" and log.splitlines()[-1] == "log line 99"
    assert not list(cases["test_passes"].iter("property"))


def test_without_the_plugin_the_sections_are_lost(pytester: pytest.Pytester) -> None:
    """Why the plugin exists: pytest's JUnit writer drops ktest's sections."""
    junit = pytester.path / "junit.xml"
    run_suite(pytester, junit, with_plugin=False)
    assert "log line 99" not in junit.read_text()


def test_the_summary_lists_failures_with_the_report_excerpt(pytester: pytest.Pytester) -> None:
    junit = pytester.path / "junit-1.37-bare-1of2.xml"
    run_suite(pytester, junit)
    totals, failures = summary.read_junit(junit)
    assert (totals.cell, totals.tests, totals.failed, totals.errors, totals.skipped) == (
        "1.37-bare-1of2",
        4,
        1,
        1,
        1,
    )
    text = summary.render([totals], failures, "ktest")
    assert text.startswith("## ktest: 2 failed of 4 tests")
    assert "| 1.37-bare-1of2 | 4 | 1 | 1 | 1 |" in text
    row = next(
        line for line in text.splitlines() if line.startswith("| `test_suite::test_widget_gets_ready`")
    )
    assert "widget w1 never became Ready \\| status {}" in row  # the table is not broken by a '|'
    assert "**ktest: operator widget-operator log**" in text
    assert "[... 70 earlier lines left out]" in text and "log line 99" in text and "log line 69\n" not in text
    assert "namespace stuck in Terminating" in text  # the teardown error
    assert "test_passes" not in text


def test_all_passing_gives_a_one_line_verdict(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ok="def test_ok():\n    pass\n")
    junit = pytester.path / "junit-1.36-kind.xml"
    inner_pytest(pytester, "--junitxml", str(junit)).assert_outcomes(passed=1)
    totals, failures = summary.read_junit(junit)
    assert summary.render([totals], failures, "ktest").startswith("## ktest: all 1 tests passed")


def test_not_junit_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "junit-x.xml"
    bad.write_text("<html/>")
    with pytest.raises(CIError, match=r"junit-x.xml is not JUnit XML \(root element <html>\)"):
        summary.read_junit(bad)
    bad.write_text("<testsuite")
    with pytest.raises(CIError, match="cannot read JUnit XML"):
        summary.read_junit(bad)


def test_excerpt_keeps_the_tail() -> None:
    assert summary.excerpt("a\nb\nc", lines=2) == "[... 1 earlier lines left out]\nb\nc"
    assert summary.excerpt("short") == "short"
    assert len(summary.excerpt("x" * 10_000, chars=100)) == 100


def test_a_huge_summary_is_cut_below_githubs_limit() -> None:
    failure = summary.Failure("t::a", "cell", "failure", "boom", "x\n" * 10, [("log", "y" * 3000)])
    text = summary.render([summary.CellTotals("cell", 400, 400)], [failure] * 400, "ktest")
    assert len(text) <= summary.SUMMARY_LIMIT + 200
    assert text.endswith("the JUnit XML artifacts have the rest)\n")


def test_run_pytest_and_report_scripts_end_to_end(tmp_path: Path) -> None:
    """The reusable workflow's two steps on a real (tiny) suite: two shards of run-pytest with
    the ktest options, then report: the job summary and the merged durations."""
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = {
        "KTEST_CI": str(SCRIPTS.parents[1]),
        "BACKEND": "bare",
        "K8S_VERSION": "1.37.2",
        "SHARDS": "2",
        "PYTEST_ARGS": "-p no:cacheprovider test_suite.py",
    }
    statuses = []
    for shard in (1, 2):
        done = run_script(
            ["bash", str(SCRIPTS / "run-pytest")],
            cwd=tmp_path,
            env={**env, "SHARD": str(shard), "ARTIFACT": f"1.37-bare-{shard}of2"},
        )
        statuses.append(done.returncode)
        assert f"junit-1.37-bare-{shard}of2.xml" in done.stdout, done.stdout + done.stderr
        (tmp_path / ".ktest-durations.json").unlink()  # each job starts from the restored file alone
    assert 1 in statuses  # the failing tests fail their shard
    results = tmp_path / ".ktest-results"
    assert sorted(p.name for p in results.iterdir()) == [
        "durations-1.37-bare-1of2.json",
        "durations-1.37-bare-2of2.json",
        "junit-1.37-bare-1of2.xml",
        "junit-1.37-bare-2of2.xml",
    ]
    step_summary = tmp_path / "summary.md"
    done = run_script(
        ["bash", str(SCRIPTS / "report")],
        cwd=tmp_path,
        env={
            "KTEST_CI": env["KTEST_CI"],
            "EXPECTED_SHARDS": "2",
            "GITHUB_STEP_SUMMARY": str(step_summary),
            "GITHUB_OUTPUT": str(tmp_path / "out"),
        },
    )
    assert done.returncode == 0, done.stderr
    assert step_summary.read_text().startswith("## ktest: 2 failed of 4 tests")
    merged = json.loads((tmp_path / ".ktest-durations.json").read_text())
    assert len(merged) == 4
