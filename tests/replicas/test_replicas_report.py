"""A failing test's report has each replica's log and API calls, and the failovers measured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ktest.controlplane import ControlPlane

STAMP = Path(__file__).resolve().parent / "kopf_stamp.py"

TEST = f'''
from ktest.operators import run_kopf
from ktest.replicas import assert_failover, kopf_peering

def test_fails_after_a_failover(cluster, namespace):
    kopf_peering(cluster, "stamp", namespaces=[namespace])
    lifetime = lambda settings: setattr(settings.peering, "lifetime", 2)
    with run_kopf({str(STAMP)!r}, cluster, namespaces=[namespace], replicas=2, peering="stamp",
                  configure=lifetime) as op:
        failover = assert_failover(op, within=8)
        print("MEASURED: " + failover.describe())
        assert False, "the test fails after the failover"
'''


def test_a_failing_tests_report_has_every_replica_and_the_failover(
    pytester: pytest.Pytester, plane: ControlPlane
) -> None:
    pytester.makepyfile(test_inner=TEST)
    context = yaml.safe_load(Path(plane.kubeconfig).read_text())["current-context"]
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-p", "no:randomly", "--ktest-backend=existing",
        f"--ktest-kubeconfig={plane.kubeconfig}", f"--ktest-context={context}",
    )
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    for section in ("operator kopf_stamp-0 log", "operator kopf_stamp-1 log",
                    "operator kopf_stamp-0 API calls", "operator kopf_stamp-1 API calls"):
        assert section in output
    measured = next(line for line in result.outlines if line.startswith("MEASURED: "))[len("MEASURED: "):]
    # Either replica may take the peering first (they start together; on a loaded machine the second
    # one started has led): the leader killed is the one the failover names first.
    failover = re.fullmatch(r"kopf_stamp-([01]) \(kill\) -> kopf_stamp-([01]): leaderless for [\d.]+ s",
                            measured)
    assert failover is not None and failover[1] != failover[2], measured
    assert "operator kopf_stamp failovers" in output and measured in output
    assert f"replicas: killed kopf_stamp-{failover[1]}" in output  # in each replica's calls, where it was
