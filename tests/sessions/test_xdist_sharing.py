"""pytest-xdist: one control plane held by the controller process, shared by two workers
(ktest.sessions.shared serves it, ktest.sessions.attached attaches to it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import crd_yaml
from inner_runs import GC_OF_NEW_KIND_TEST, NON_STRUCTURAL_CRD

OWN_PLANE = pytest.mark.own_plane("the controller's own plane, shared with its workers")

WORKER_TESTS = """
import json, os, pytest
from kubernetes.client.exceptions import ApiException


OUT = os.environ["KTEST_TEST_OUT"]

@pytest.mark.parametrize("n", range(4))
def test_worker(cluster, namespace, worker_namespace_selector, n):
    cluster.create({"apiVersion": "xdist.example.com/v1", "kind": "Crate",
                    "metadata": {"name": "c"}, "spec": {"n": n}}, namespace=namespace)
    bob = cluster.user("bob")
    with pytest.raises(ApiException) as denied:
        bob.get(("v1", "Namespace", namespace))
    assert denied.value.status == 403
    with open(os.path.join(OUT, f"{n}.json"), "w") as out:
        json.dump({"worker": os.environ["PYTEST_XDIST_WORKER"], "pid": os.getpid(),
                   "server": cluster.server, "kubeconfig": str(cluster.kubeconfig),
                   "namespace": namespace, "selector": worker_namespace_selector,
                   "labels": cluster.get(("v1", "Namespace", namespace))["metadata"]["labels"]}, out)
"""


@OWN_PLANE
def test_two_workers_share_one_control_plane(
    pytester: pytest.Pytester, inner_env: dict, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("KTEST_TEST_OUT", str(out))
    pytester.path.joinpath("crd.yaml").write_text(crd_yaml("xdist.example.com", "Crate"))
    gc_test = GC_OF_NEW_KIND_TEST.format(crd=crd_yaml("gc.example.com", "Sprocket"))
    pytester.makepyfile(test_workers=WORKER_TESTS, test_gc=gc_test)
    result = pytester.runpytest_subprocess("-n", "2", "--ktest-crds=crd.yaml", timeout=300)
    result.assert_outcomes(passed=5)
    seen = [json.loads(path.read_text()) for path in sorted(out.glob("*.json"))]
    assert len(seen) == 4  # the GC test writes nothing
    assert {entry["worker"] for entry in seen} == {"gw0", "gw1"}
    assert len({entry["pid"] for entry in seen}) == 2
    assert len({entry["server"] for entry in seen}) == 1, "workers must share one API server"
    assert len({entry["namespace"] for entry in seen}) == 4
    for entry in seen:  # a session operator per worker can serve just its worker's namespaces
        assert entry["labels"]["ktest.dev/worker"] == entry["worker"]
        assert entry["selector"] == f"ktest.dev/worker={entry['worker']}"
    result.stdout.fnmatch_lines(["cluster: embedded control plane * at https://127.0.0.1:*"])
    # The controller stopped the control plane at the end: its directory is gone.
    assert not Path(seen[0]["kubeconfig"]).parent.exists()


def _two_workers_with_crds(pytester: pytest.Pytester, crd_file: str) -> pytest.RunResult:
    """Two ktest tests on two xdist workers, ``crd_file`` the session's CRD file: both must error."""
    pytester.path.joinpath("crd.yaml").write_text(crd_file)
    pytester.makepyfile("def test_a(cluster):\n    pass\n\ndef test_b(cluster):\n    pass\n")
    result = pytester.runpytest_subprocess("-n", "2", "--ktest-crds=crd.yaml", timeout=300)
    result.assert_outcomes(errors=2)
    return result


def test_worker_reports_the_controllers_start_error(pytester: pytest.Pytester, inner_env: dict) -> None:
    # a CRD file that is well formed (checked before anything starts) but that the API server
    # rejects: the error happens in the controller, which opened the session's cluster (here it
    # attaches to the warm plane: the rejection needs an API server, not one of its own)
    result = _two_workers_with_crds(pytester, NON_STRUCTURAL_CRD)
    result.stdout.fnmatch_lines(
        [
            "*CRDError: *crd.yaml, document 1 (line 1): the API server rejected CustomResourceDefinition "
            "loose.rejected.example.com*"
        ]
    )
    result.stdout.fnmatch_lines(["*raised in the process that holds the cluster*"])


@OWN_PLANE
def test_bad_crd_files_fail_in_the_workers_before_anything_starts(
    pytester: pytest.Pytester, inner_env: dict
) -> None:
    result = _two_workers_with_crds(pytester, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    result.stdout.fnmatch_lines(
        [
            "ktest: option --ktest-crds: *crd.yaml, document 1 (line 1): ConfigMap x (v1) is not a "
            "CustomResourceDefinition*"
        ]
    )
    assert "raised in the process that holds the cluster" not in result.stdout.str()  # none was started
