"""What a kopf operator from the wild tripped over, through the pytest plugin.

An inner pytest session (``--ktest-backend=existing`` on this module's control plane) runs
operators written as kopf's docs write them and checks, from the outside, what a user sees:
a cluster-scoped custom resource with kopf's finalizer is finalized by ``operator_for_test``;
a cluster-wide ``operator_for_test`` does not wait for other tests' namespaces;
``expect_crash`` takes the whole failure (kopf logs more than one ERROR for it, and it fires
with ``fail_on_errors=False`` too); and a test failed by an operator error is reported once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from operator_helpers import HERE, SAMPLES

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane

CRD = HERE / "crds" / "clusterpolicies.yaml"

CONFTEST = """
import sys
sys.path.insert(0, {tests!r})

import pytest
from ktest.operators import run_kopf
from ktest.operators.pytest_fixtures import operator_for_test

SAMPLES = {samples!r}


@pytest.fixture(scope="session", autouse=True)
def crds(cluster):
    cluster.install_crds({crd!r})


@pytest.fixture
def policy_operator(cluster, namespace):
    operator = run_kopf(SAMPLES + "/kopf_cluster_policy.py", cluster, cluster_wide=True, name="policy")
    with operator_for_test(operator, cluster, namespace) as op:
        yield op


@pytest.fixture(params=[True, False], ids=["fail_on_errors", "quiet"])
def failing(cluster, namespace, request):
    operator = run_kopf(SAMPLES + "/kopf_logging_handler.py", cluster, namespaces=[namespace],
                        fail_on_errors=request.param)
    with operator_for_test(operator, cluster, namespace) as op:
        yield op


@pytest.fixture
def loud(cluster, namespace):
    operator = run_kopf(SAMPLES + "/kopf_logging_handler.py", cluster, namespaces=[namespace], name="loud")
    with operator_for_test(operator, cluster, namespace) as op:
        yield op
"""

TESTS = """
from ktest.wait import eventually

RECORD = {record!r}


def explode(cluster, namespace):
    cluster.create({{"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {{"name": "bad", "namespace": namespace,
                                  "labels": {{"ktest.dev/explode": "true"}}}}}})


def test_a_held_namespace_is_left_deleting(cluster, namespace):
    held = {{"name": "held", "namespace": namespace, "finalizers": ["ktest.dev/hold"]}}
    cluster.create({{"apiVersion": "v1", "kind": "ConfigMap", "metadata": held}})
    with open(RECORD, "a") as record:
        record.write("held " + namespace + "\\n")


def test_a_cluster_scoped_policy(cluster, namespace, policy_operator):
    label = "ktest.dev/policy-" + namespace
    cluster.patch(("v1", "Namespace", namespace), {{"metadata": {{"labels": {{label: "yes"}}}}}})
    name = "p-" + namespace
    cluster.create({{"apiVersion": "ops.ktest.dev/v1", "kind": "ClusterPolicy", "metadata": {{"name": name}},
                    "spec": {{"namespaceLabel": label}}}})
    stamped = ("v1", "ConfigMap", "policy-" + name, namespace)
    eventually(lambda: cluster.get(stamped)["data"]["policy"] == name)
    policy = cluster.get(("ops.ktest.dev/v1", "ClusterPolicy", name))
    assert "kopf.zalando.org/KopfFinalizerMarker" in policy["metadata"]["finalizers"]
    with open(RECORD, "a") as record:
        record.write("policy " + name + "\\n")


def test_the_held_namespace_is_still_deleting(cluster):
    held = [line.split()[1] for line in open(RECORD) if line.startswith("held ")]
    namespace = cluster.get(("v1", "Namespace", held[0]))
    assert namespace["metadata"].get("deletionTimestamp"), namespace["status"]
    cluster.patch(("v1", "ConfigMap", "held", held[0]), {{"metadata": {{"finalizers": None}}}})


def test_an_expected_crash_is_the_whole_failure(cluster, namespace, failing):
    with failing.expect_crash(match="data.size must be a positive number") as crash:
        explode(cluster, namespace)
    eventually(lambda: len(crash.aftermath) >= 1, timeout=5)
    print("AFTERMATH", len(crash.aftermath), crash.aftermath[0].splitlines()[0])


def test_an_operator_error_is_reported_once(cluster, namespace, loud):
    explode(cluster, namespace)
    eventually(lambda: cluster.exists(("v1", "ConfigMap", "bad-done", namespace)), timeout=60)
"""


def test_what_an_operator_from_the_wild_tripped_over(
    pytester: pytest.Pytester, plane: ControlPlane, admin: Cluster, tmp_path: Path
) -> None:
    record = tmp_path / "record.txt"
    record.touch()
    pytester.makeconftest(CONFTEST.format(tests=str(HERE), samples=str(SAMPLES), crd=str(CRD)))
    pytester.makepyfile(test_inner=TESTS.format(record=str(record)))
    context = yaml.safe_load(Path(plane.kubeconfig).read_text())["current-context"]
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-rA", "-s",
        "--ktest-backend=existing", f"--ktest-kubeconfig={plane.kubeconfig}", f"--ktest-context={context}",
        "--ktest-finalizer-grace=60",
        timeout=300,
    )
    output = result.stdout.str()
    # One failure, reported once: the test failed by the operator's error, not its teardown too.
    result.assert_outcomes(passed=5, failed=1, errors=0)
    assert re.search(r"FAILED test_inner.py::test_an_operator_error_is_reported_once", output), output
    assert "ERROR at teardown" not in output, output
    assert "cannot reconcile bad: data.size must be a positive number" in output
    # expect_crash took kopf's follow-up ERROR record ("failed temporarily") as part of the
    # crash, with and without fail_on_errors.
    assert len(re.findall(r"AFTERMATH 1 .*failed temporarily", output)) == 2, output
    # the cluster-scoped ClusterPolicy was finalized by the operator, not left stuck
    [policy] = [line.split()[1] for line in record.read_text().splitlines() if line.startswith("policy ")]
    assert admin.get_or_none(("ops.ktest.dev/v1", "ClusterPolicy", policy)) is None
    assert "removed finalizers by force" not in output
