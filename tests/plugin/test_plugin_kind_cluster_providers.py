"""Whose ``kind_cluster`` a test gets: ktest's on backend kind; off kind, another plugin's when one
provides it (pytest-kind's fork pytest-kind-ng, installed by the dev extra, or any plugin, whatever
its name), else ktest's (which skips there, saying how to run it).

The inner runs are in this process: a new pytest config loads every plugin from its entry point
there, as in a user's run (``-p no:NAME`` leaves one out). The fork's fixture is run for real: a
stand-in ``kind`` (``--kind-bin``, the one thing outside Kubernetes) reports the cluster as
existing, and its kubeconfig (``--kubeconfig``) is the session's real control plane's, which the
fork's ``api`` (pykube) then lists namespaces from.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from inner_runs import run_inner

from ktest.controlplane import ControlPlane

pytestmark = pytest.mark.own_plane("that ktest starts nothing off kind")

FORK_TEST = """
def test_on_the_forks_cluster(kind_cluster):
    from pytest_kind.cluster import KindCluster
    import pykube

    assert isinstance(kind_cluster, KindCluster)
    names = [ns.name for ns in pykube.Namespace.objects(kind_cluster.api)]
    print("FORK", kind_cluster.name, "kube-system" in names)
"""

ANY_PLUGIN = """
import pytest

@pytest.fixture(scope="session")
def kind_cluster():
    return "the cluster of my own kind plugin"
"""

WHOSE = """
def test_whose(kind_cluster):
    print("KIND_CLUSTER", type(kind_cluster).__module__, kind_cluster)
"""


def _stand_in_kind(tmp_path: Path, cluster: str) -> tuple[Path, Path]:
    """A ``kind`` that knows one cluster and logs how it was called."""
    calls = tmp_path / "kind-calls.log"
    kind = tmp_path / "kind"
    kind.write_text(
        f'#!/bin/sh\necho "$@" >> {calls}\nif [ "$1 $2" = "get clusters" ]; then echo {cluster}; fi\n'
    )
    kind.chmod(0o755)
    return kind, calls


def test_on_bare_a_kind_cluster_test_runs_on_pytest_kind_ng_and_ktest_starts_nothing(
    pytester: pytest.Pytester, inner_env: dict[str, str], plane: ControlPlane, tmp_path: Path
) -> None:
    kind, calls = _stand_in_kind(tmp_path, "fork-cluster")
    result = run_inner(
        pytester, FORK_TEST,
        "-s", "--cluster-name", "fork-cluster", f"--kind-bin={kind}", f"--kubeconfig={plane.kubeconfig}",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*FORK fork-cluster True*"])
    listed, deleted = calls.read_text().splitlines()  # the fork's fixture: found it, and deleted it
    assert listed == "get clusters" and deleted.startswith("delete cluster --name=fork-cluster")
    output = result.stdout.str()
    assert "backend=bare" in output  # ktest was loaded, on its default backend ...
    assert "cluster:" not in output and "control plane" not in output, output  # ... and started nothing


def test_any_plugin_that_provides_kind_cluster_keeps_it_whatever_its_name(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    pytester.makepyfile(my_kind_plugin=ANY_PLUGIN, test_whose=WHOSE)
    result = pytester.runpytest_inprocess("-s", "-p", "no:pytest-kind-ng", "-p", "my_kind_plugin")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*KIND_CLUSTER builtins the cluster of my own kind plugin*"])


def test_with_no_other_provider_ktests_kind_cluster_skips_off_kind(
    pytester: pytest.Pytester, inner_env: dict[str, str], plane: ControlPlane
) -> None:
    pytester.makepyfile(test_whose=WHOSE)
    result = pytester.runpytest_inprocess(
        "-rs", "-p", "no:pytest-kind-ng", "--ktest-backend=existing",
        f"--ktest-kubeconfig={plane.kubeconfig}", "--ktest-context=ktest-admin@ktest",
    )
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs real nodes (the kind fixture): run it with --ktest-backend kind*"])


@pytest.mark.parametrize(
    ("backend", "provider"),
    [("bare", "pytest_kind/plugin.py"), ("kind", "ktest/backends/kind/pytest_kind_compat.py")],
)
def test_whose_kind_cluster_a_test_gets_with_pytest_kind_ng_installed(
    pytester: pytest.Pytester, inner_env: dict[str, str], backend: str, provider: str
) -> None:
    """Asked of pytest without running the test (no cluster is made): the fork's fixture off kind,
    ktest's on kind (where it overrides the fork's)."""
    pytester.makepyfile(test_whose=WHOSE)
    result = pytester.runpytest_inprocess("--fixtures-per-test", f"--ktest-backend={backend}")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.re_match_lines([rf"^kind_cluster -- .*{provider}:\d+$"])
