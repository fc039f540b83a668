"""Helpers shared by the plugin tests."""

from __future__ import annotations

import pytest


def crd_yaml(plural: str, kind: str, group: str, versions: tuple[str, ...] = ("v1",)) -> str:
    """A minimal valid namespaced CRD as YAML (first version is the storage version)."""
    listed = "".join(
        f"""
  - name: {version}
    served: true
    storage: {"true" if index == 0 else "false"}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, x-kubernetes-preserve-unknown-fields: true}}"""
        for index, version in enumerate(versions)
    )
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: {plural}, singular: {plural[:-1]}, kind: {kind}}}
  versions:{listed}
"""


def printed(result: pytest.RunResult, tag: str) -> list[str]:
    """What the inner tests printed after ``tag`` (run with -s)."""
    return [line.split(tag, 1)[1].strip() for line in result.outlines if tag in line]


GC_OF_NEW_KIND_TEST = '''
def test_children_of_a_kind_installed_here_are_collected(cluster, namespace):
    # The owner process restarts its garbage collector when asked (else: 30 s discovery resync).
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
