"""Objects the tests create, built in one place (``import builders``: tests/ is on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from ktest.cluster import ObjectRef


def configmap(
    name: str,
    namespace: str | None = None,
    data: Mapping[str, str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    owner: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ConfigMap manifest; without ``namespace`` the call that creates it names one.

    ``owner``: an object read from the API server, made the ConfigMap's controller
    (see :func:`owner_reference`)."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = dict(labels)
    if owner is not None:
        metadata["ownerReferences"] = [owner_reference(owner)]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": dict(data or {})}


def configmap_ref(name: str, namespace: str) -> ObjectRef:
    """The reference of a ConfigMap, for get/patch/delete and the assertions."""
    return ObjectRef("v1", "ConfigMap", name, namespace)


def owner_reference(
    owner: Mapping[str, Any], *, controller: bool = True, block: bool = True
) -> dict[str, Any]:
    """An ownerReference to ``owner`` (an object read from the API server)."""
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": block,
    }


def crd(
    group: str,
    kind: str,
    *,
    schema: Mapping[str, Any] | None = None,
    status: bool = False,
    versions: Sequence[str] = ("v1",),
    plural: str | None = None,
) -> dict[str, Any]:
    """A namespaced CustomResourceDefinition of ``kind`` (plural: ``kind``s unless given).

    ``schema``: the openAPIV3Schema of every version (default: an object that keeps any field);
    ``status``: with the status subresource; ``versions``: all served, the first one stored."""
    plural = plural or kind.lower() + "s"
    keep_any = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    served: list[dict[str, Any]] = []
    for index, version in enumerate(versions):
        entry: dict[str, Any] = {
            "name": version,
            "served": True,
            "storage": index == 0,
            "schema": {"openAPIV3Schema": dict(schema or keep_any)},
        }
        if status:
            entry["subresources"] = {"status": {}}
        served.append(entry)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "scope": "Namespaced",
            "versions": served,
        },
    }


def crd_yaml(group: str, kind: str, **options: Any) -> str:
    """:func:`crd` as one YAML document, for the CRD files of inner test runs."""
    return yaml.safe_dump(crd(group, kind, **options), sort_keys=False)


def custom_object(
    api_version: str, kind: str, name: str, namespace: str, spec: Mapping[str, Any], **metadata: Any
) -> dict[str, Any]:
    """A namespaced custom object with ``spec`` (``metadata``: more fields, e.g. labels=...)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "spec": dict(spec),
    }


def configmap_creation_webhook(
    name: str, webhook: str, client_config: Mapping[str, Any], **fields: Any
) -> dict[str, Any]:
    """A ValidatingWebhookConfiguration ``name`` of one webhook ``webhook``, called at
    ``client_config`` when a ConfigMap is created; ``fields``: more of the webhook's fields
    (``failurePolicy``, ...)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": webhook,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                **fields,
                "clientConfig": dict(client_config),
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                        "operations": ["CREATE"],
                    }
                ],
            }
        ],
    }
