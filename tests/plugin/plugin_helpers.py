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
