"""Operators through the pytest plugin: failing tests carry the operator's error and its logs,
and a session-scoped operator outlives the namespaces it works in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from operator_helpers import HERE, SAMPLES

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane

CONFTEST = """
import sys
sys.path.insert(0, {tests!r})

import pytest
from ktest.operators import run_kopf, run_subprocess
from ktest.operators.pytest_fixtures import namespace_for

SAMPLES = {samples!r}


@pytest.fixture(scope="session")
def guard(cluster):
    with run_kopf(SAMPLES + "/kopf_finalizer.py", cluster, cluster_wide=True, name="guard") as op:
        yield op


@pytest.fixture
def ns(cluster, guard):
    with namespace_for(guard, cluster, delete_timeout=40) as name:
        with open({record!r}, "a") as record:
            record.write(name + "\\n")
        yield name


@pytest.fixture
def broken(cluster, namespace):
    with run_kopf(SAMPLES + "/kopf_broken_import.py", cluster, namespaces=[namespace]) as op:
        yield op


@pytest.fixture
def failing(cluster, namespace):
    with run_kopf(SAMPLES + "/kopf_failing_handler.py", cluster, namespaces=[namespace]) as op:
        yield op


@pytest.fixture
def dying(cluster):
    script = "echo ready; sleep 0.5; echo 'fatal: lost leadership' >&2; exit 1"
    with run_subprocess(["sh", "-c", script], cluster, ready_log="^ready$", name="dying") as op:
        yield op
"""

TESTS = """
import time

from ktest.wait import eventually

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


def guarded(cluster, ns, name):
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": name, "namespace": ns, "labels": {"ktest.dev/guarded": "true"}}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}
    eventually(lambda: FINALIZER in (cluster.get(ref)["metadata"].get("finalizers") or []))


def test_guarded_one(cluster, ns):
    guarded(cluster, ns, "one")


def test_guarded_two(cluster, ns):
    guarded(cluster, ns, "two")


def test_report_shows_operator_logs_during_this_test(cluster, ns):
    guarded(cluster, ns, "shown")
    assert False, "deliberate failure to get a report"


def test_failing_while_the_operator_says_nothing(cluster, guard):
    assert False, "deliberate failure during which the session operator logs nothing"


def test_operator_that_cannot_be_imported(broken):
    pass


def test_operator_handler_raises(cluster, namespace, failing):
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "bad", "namespace": namespace,
                                   "labels": {"ktest.dev/explode": "true"}}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad-done", "namespace": namespace}}
    eventually(lambda: cluster.exists(ref), timeout=60)


def test_subprocess_exits_1(dying):
    while dying.alive:  # no assertion at all: the plugin checks the operator after the body
        time.sleep(0.05)
"""


def test_failures_and_logs_through_the_plugin(
    pytester: pytest.Pytester, plane: ControlPlane, admin: Cluster, tmp_path: Path
) -> None:
    record = tmp_path / "namespaces.txt"
    pytester.makeconftest(CONFTEST.format(tests=str(HERE), samples=str(SAMPLES), record=str(record)))
    pytester.makepyfile(test_inner=TESTS)
    context = yaml.safe_load(Path(plane.kubeconfig).read_text())["current-context"]
    # a child process: kopf's logging is configured there as in a user's run (in this process the
    # outer session's log handlers change what the report's operator-log section gets)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--ktest-backend=existing",
        f"--ktest-kubeconfig={plane.kubeconfig}",
        f"--ktest-context={context}",
        "-rA",
        timeout=300,
    )
    output = result.stdout.str()
    result.assert_outcomes(passed=2, failed=4, errors=1)

    # an operator that raises at import: the fixture errors with the exception and its traceback
    assert "boom at import: OPERATOR_MODE must be 'strict' or 'lenient'" in output
    assert 'kopf_broken_import.py", line 7' in output
    # a handler that raises: eventually fails with the handler's exception, not with a timeout
    assert "ValueError: cannot reconcile bad: data.size must be a positive number" in output
    assert "logged an error" in output
    # a subprocess that exits 1 without the test asserting anything
    assert "operator 'dying' (subprocess) exited with status 1" in output
    assert "fatal: lost leadership" in output

    # the failing test's report carries what the session-scoped operator logged during that test only
    section = output.split("ktest: operator guard log during this test", 1)[1].split("short test summary")[0]
    assert "/shown] Handler 'guard' succeeded" in section
    assert "/one]" not in section and "/two]" not in section
    # a failing test during which the operator wrote nothing gets no empty log section
    assert output.count("ktest: operator guard log during this test") == 1

    # the namespaces were deleted while the operator ran: its finalizers were processed, none forced
    names = record.read_text().split()
    assert len(names) == 3
    for name in names:
        assert (
            admin.get_or_none({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}) is None
        )
    assert "removed finalizers by force" not in output


BACKGROUND_CONFTEST = """
import sys
sys.path.insert(0, {tests!r})

import pytest
from ktest.operators import run_kopf


@pytest.fixture(scope="session")
def guard(cluster):
    with run_kopf({samples!r} + "/kopf_finalizer.py", cluster, cluster_wide=True, name="guard") as op:
        yield op
"""

BACKGROUND_TESTS = """
from ktest.wait import eventually

FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"


def test_guarded_object_in_the_plain_namespace_fixture(cluster, guard, namespace):
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "kept", "namespace": namespace,
                                 "labels": {"ktest.dev/guarded": "true"}}})
    ref = ("v1", "ConfigMap", "kept", namespace)
    eventually(lambda: FINALIZER in (cluster.get(ref)["metadata"].get("finalizers") or []))
    print("NS", namespace)
"""


def test_session_operator_waits_for_background_namespace_deletions(
    pytester: pytest.Pytester, plane: ControlPlane, admin: Cluster
) -> None:
    """Teardown only starts the namespace deletion (the default); the session-scoped operator's
    close() waits for it, so the operator itself removes its finalizer: nothing is forced."""
    pytester.makeconftest(BACKGROUND_CONFTEST.format(tests=str(HERE), samples=str(SAMPLES)))
    pytester.makepyfile(test_inner=BACKGROUND_TESTS)
    context = yaml.safe_load(Path(plane.kubeconfig).read_text())["current-context"]
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-s",
        "--ktest-backend=existing", f"--ktest-kubeconfig={plane.kubeconfig}", f"--ktest-context={context}",
        "--ktest-finalizer-grace=1",
    )
    result.assert_outcomes(passed=1)
    output = result.stdout.str()
    [name] = re.findall(r"NS (\S+)", output)
    assert admin.get_or_none(("v1", "Namespace", name)) is None
    assert "NamespaceCleanupWarning" not in output, output
