"""The web operator's roles, written by hand: the minimal one its requests need, and a seeded one
(no ``patch`` on ``deployments/status``, a wildcard rule, an unused ``delete``)."""

MINIMAL = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: web-operator}
rules:
- {apiGroups: [""], resources: [namespaces], verbs: [list, watch]}
- {apiGroups: [apiextensions.k8s.io], resources: [customresourcedefinitions], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: web-operator, namespace: web}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [list, watch, patch]}
- {apiGroups: [apps], resources: [deployments], verbs: [get, create]}
- {apiGroups: [apps], resources: [deployments/status], verbs: [patch]}
"""
SEEDED = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: web-operator}
rules:
- {apiGroups: ["*"], resources: ["*"], verbs: [list, watch]}
- {apiGroups: [""], resources: [configmaps], verbs: [list, watch, patch]}
- {apiGroups: [apps], resources: [deployments], verbs: [get, create, delete]}
"""
