"""What the tests that run an inner pytest session through the plugin share (tests/plugin,
tests/sessions): their fixtures ``binary_cache`` and ``inner_env`` are in tests/conftest.py."""

from __future__ import annotations

import pytest
from builders import crd_yaml

# A CRD file that is well formed, but its schema has no type at the root: only the API server rejects it
NON_STRUCTURAL_CRD = crd_yaml(
    "rejected.example.com", "Loose", plural="loose", schema={"properties": {"spec": {"type": "object"}}}
)


def run_inner(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    """``source`` as the inner session's test module, run through the plugin in this process
    (pytester restores its modules and path afterwards), its tests in the order written
    (``-p no:randomly``). An inner session that needs a fresh interpreter (imports, entry points,
    signals, xdist workers) runs with :func:`run_inner_in_child`."""
    pytester.makepyfile(source)
    return pytester.runpytest_inprocess("-p", "no:randomly", *args)


def run_inner_in_child(
    pytester: pytest.Pytester, source: str, *args: str, timeout: float = 300
) -> pytest.RunResult:
    """As :func:`run_inner`, in a child process bounded by ``timeout``: a user's session as it runs."""
    pytester.makepyfile(source)
    return pytester.runpytest_subprocess("-p", "no:randomly", *args, timeout=timeout)


def printed(result: pytest.RunResult, tag: str) -> list[str]:
    """What the inner tests printed after ``tag`` (run with -s)."""
    return [line.split(tag, 1)[1].strip() for line in result.outlines if tag in line]


GC_OF_NEW_KIND_TEST = '''
def test_children_of_a_kind_installed_here_are_collected(cluster, namespace):
    # The process holding the cluster restarts its garbage collector when asked (else: 30 s discovery resync).
    from ktest.wait import eventually
    cluster.install_crds(CRD)
    owner = cluster.create({{"apiVersion": "gc.example.com/v1", "kind": "Sprocket",
                            "metadata": {{"name": "o"}}}}, namespace=namespace)
    child = cluster.create({{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "c",
        "ownerReferences": [{{"apiVersion": "gc.example.com/v1", "kind": "Sprocket", "name": "o",
                             "uid": owner["metadata"]["uid"]}}]}}}}, namespace=namespace)
    cluster.delete(owner)
    eventually(lambda: not cluster.exists(child), timeout=12)

CRD = """{crd}"""
'''
