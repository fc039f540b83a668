"""Inner sessions through the plugin that start a control plane of their own (their settings shape
it) and serve the checks of several test modules: each runs once per outer session (per xdist
worker: the tests using one carry its ``xdist_group``), by whichever of those tests comes first,
and every test asserts on that one run's output and on its own inner tests' outcomes.

``LONG_NAMES_SESSION`` (test_plugin_controllers_gate.py, test_plugin_bare.py): controllers given
by their long names; the gate's test first, the test that kills a component last. It takes no API
server flags: they start the plane without the etcd template, a slower start after which the
controllers were up before the first test body even with the plugin's wait taken out.
``NO_CONTROLLERS_SESSION`` (test_plugin_min_k8s_on_bare.py, test_plugin_apiserver_flags.py,
test_plugin_bare.py): extra API server flags and feature gates, no kube-controller-manager.
"""

from __future__ import annotations

import dataclasses
import os

import pytest
from builders import crd_yaml
from inner_runs import GC_OF_NEW_KIND_TEST


@dataclasses.dataclass(frozen=True)
class SharedRun:
    """An inner session: its test module (``test_<name>.py``), its options and its xdist group."""

    name: str
    source: str
    args: tuple[str, ...]

    @property
    def group(self) -> pytest.MarkDecorator:
        """Keeps the tests asserting on this run on one xdist worker (``--dist loadgroup``)."""
        return pytest.mark.xdist_group(f"plugin-{self.name}")


_RUNS = pytest.StashKey[dict[str, pytest.RunResult]]()


def shared_run(pytester: pytest.Pytester, config: pytest.Config, run: SharedRun) -> pytest.RunResult:
    """The result of ``run``, run in this process on first use (with the caller's ``pytester`` and
    ``inner_env``) and kept in ``config``'s stash for the other callers."""
    runs = config.stash.setdefault(_RUNS, {})
    if run.name not in runs:
        assert "KTEST_REUSE" not in os.environ, f"{run.name} starts a plane: mark the caller own_plane"
        module = pytester.makepyfile(**{f"test_{run.name}": run.source})
        runs[run.name] = pytester.runpytest_inprocess("-p", "no:randomly", *run.args, str(module))
    return runs[run.name]


def outcomes(result: pytest.RunResult, test: str) -> dict[str, str]:
    """How the inner test ``test`` went, by phase (``{"setup": "passed", "call": "failed", ...}``)."""
    reports = result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
    return {report.when: report.outcome for report in reports if report.nodeid.endswith(f"::{test}")}


def assert_passed(result: pytest.RunResult, *tests: str) -> None:
    """Each of ``tests`` ran in ``result``'s session and passed in every phase."""
    for test in tests:
        phases = outcomes(result, test)
        assert phases and set(phases.values()) == {"passed"}, (
            f"inner test {test}: {phases or 'did not run'}\n{result.stdout.str()}"
        )


# The default controllers' gate on a plane with nodes: tests/nodes/test_plugin_nodes.py.
GATE_TEST = """
def test_first(ktest_backend):
    # Before any other test body: the plugin waited for the controllers the bare backend left starting.
    from ktest.controlplane.controller_manager import ready_markers
    plane = ktest_backend.control_plane
    log = plane.log_path("kube-controller-manager").read_bytes()
    markers = ready_markers(plane.controllers)
    assert markers, f"no log line tells that {sorted(plane.controllers)} run"
    missing = [m for m in markers if m not in log]
    assert not missing, f"the test body ran before the controllers: {missing}"
"""

FLAGS_TEST = """
def test_flags_reach_the_api_server(control_plane):
    from pathlib import Path
    pid = control_plane.processes()["kube-apiserver"].pid
    arguments = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\\0")
    print("ARGS", [a for a in arguments if a.startswith(("--event-ttl", "--feature-gates"))])
"""

BARE_FIXTURES_TESTS = """
def test_control_plane(cluster, control_plane, namespace):
    print("DIR", control_plane.directory)
    assert cluster.server == control_plane.server
    assert cluster.version == control_plane.version
    assert control_plane.controllers == {"garbage-collector-controller", "namespace-controller"}
    assert cluster.gc_available and cluster.namespace_controller_available

def test_users_get_rbac(cluster, namespace):
    import pytest
    from kubernetes.client.exceptions import ApiException
    from ktest.wait import eventually
    alice = cluster.user("alice", ["devs"])
    with pytest.raises(ApiException) as denied:
        alice.list("v1", "ConfigMap", namespace)
    assert denied.value.status == 403
    rbac = "rbac.authorization.k8s.io"
    cluster.apply({"apiVersion": rbac + "/v1", "kind": "Role",
                   "metadata": {"name": "cm-reader", "namespace": namespace},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                              "verbs": ["get", "list", "watch"]}]})
    cluster.apply({"apiVersion": rbac + "/v1", "kind": "RoleBinding",
                   "metadata": {"name": "devs-read", "namespace": namespace},
                   "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "cm-reader"},
                   "subjects": [{"apiGroup": rbac, "kind": "Group", "name": "devs"}]})

    def alice_can_list():  # RBAC sees the new binding a moment later
        try:
            return alice.list("v1", "ConfigMap", namespace) == []
        except ApiException as error:
            raise AssertionError(f"still {error.status}") from None

    eventually(alice_can_list)

def test_the_cluster_knows_they_run(cluster, namespace):
    assert cluster.gc_available and cluster.namespace_controller_available
"""

DIES_LAST = """
def test_zz_controller_manager_dies(control_plane):
    control_plane.processes()["kube-controller-manager"].kill()
    assert False, "operator stopped making progress"
"""

LONG_NAMES_SESSION = SharedRun(
    "long_names_session",
    GATE_TEST
    + BARE_FIXTURES_TESTS
    + GC_OF_NEW_KIND_TEST.format(crd=crd_yaml("gc.example.com", "Sprocket"))
    + DIES_LAST,
    (
        "-s",
        # Long names count as running; the last test kills the namespace controller: the earlier
        # namespaces must be gone by then.
        "--ktest-controllers=garbage-collector-controller,namespace-controller",
        "--ktest-namespace-deletion=wait",
        "-W",
        "default",
    ),
)

ALLOWED_TESTS = """
import pytest

@pytest.mark.ktest_min_k8s("1.20")
def test_old_enough():
    print("RAN old_enough")

@pytest.mark.ktest_min_k8s("1.20")
def test_old_enough_on_the_cluster(cluster):
    print("RAN on", cluster.version)
"""

WITHOUT_CONTROLLERS_TESTS = """
def test_no_controller_runs(cluster, control_plane, namespace):
    assert control_plane.controllers == frozenset()
    assert not cluster.namespace_controller_available

def test_a_second_namespace(namespace):
    pass
"""

# The version allowed tests first: the first decides before any cluster is opened.
NO_CONTROLLERS_SESSION = SharedRun(
    "no_controllers_session",
    ALLOWED_TESTS + FLAGS_TEST + WITHOUT_CONTROLLERS_TESTS,
    (
        "--strict-markers",
        "-s",
        "--ktest-controllers=none",
        "--ktest-apiserver-flag=--event-ttl=2h",
        "--ktest-feature-gates=AllAlpha=false",
    ),
)
