"""Markers: ``ktest_nodes`` (needs real nodes) and ``ktest_min_k8s`` (needs a Kubernetes version)."""

from __future__ import annotations

import pytest

MARKED = """
import pytest

@pytest.mark.ktest_nodes
def test_needs_nodes(cluster):  # e.g. applies a Deployment and waits for its Pods
    print("RAN needs_nodes")

@pytest.mark.ktest_min_k8s("1.99")
def test_from_the_future(cluster):
    print("RAN future")

@pytest.mark.ktest_min_k8s("1.20")
def test_old_enough(cluster):
    print("RAN old_enough")

def test_plain():
    print("RAN plain")
"""


def test_markers_are_registered(pytester: pytest.Pytester, inner_env: dict) -> None:
    result = pytester.runpytest_inprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.ktest_nodes:*", "@pytest.mark.ktest_min_k8s(version):*"])


def test_nodes_marker_selects_and_skips_on_bare_without_starting(pytester: pytest.Pytester,
                                                                 inner_env: dict) -> None:
    """`-m ktest_nodes` picks the node tests; on bare they are skipped (nothing is started)."""
    pytester.makepyfile(MARKED)
    result = pytester.runpytest_inprocess("--strict-markers", "-m", "ktest_nodes", "-rs", "-s")
    result.assert_outcomes(skipped=1, deselected=3)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] *ktest_nodes: this test needs real nodes (a kubelet: containers that run, exec, "
        "logs, port-forward, images), and backend bare runs none (its simulated nodes, ktest_nodes=N, "
        "schedule Pods and report them Running, but run no container); run it with --ktest-backend kind*"
    ])
    result.stdout.no_fnmatch_line("*RAN*")
    result.stdout.no_fnmatch_line("*cluster: *")  # no backend was opened


def test_min_version_and_nodes_on_an_existing_cluster_without_nodes(
    pytester: pytest.Pytester, existing_args: list[str], plane
) -> None:
    pytester.makepyfile(MARKED)
    result = pytester.runpytest_inprocess("--strict-markers", "-rs", "-s", *existing_args)
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines_random([
        "*RAN old_enough*",
        "*RAN plain*",
        "SKIPPED *ktest_min_k8s: this test needs Kubernetes 1.99 or newer, and the cluster runs "
        f"{plane.version}*",
        "SKIPPED *ktest_nodes: this test needs real nodes, and the existing cluster (*) has none*",
    ])


def test_a_wrong_min_version_says_how_to_write_it(pytester: pytest.Pytester, inner_env: dict) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.ktest_min_k8s("one.thirty")
        def test_x():
            pass
        """
    )
    result = pytester.runpytest_inprocess("--strict-markers")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*@pytest.mark.ktest_min_k8s('one.thirty',): give one Kubernetes version as major.minor, "
         "for example @pytest.mark.ktest_min_k8s(\"1.36\")*"]
    )
