"""kube-controller-manager really runs: owner references are garbage-collected
(background, foreground, orphan) and namespaces finish deleting."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from builders import crd

from ktest.controlplane import ControlPlane
from ktest.wait import eventually

ApiException = kubernetes.client.ApiException


def _exists(read: Any, *args: Any) -> Any:
    try:
        return read(*args)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _owner_and_dependent(core: Any, namespace: str, block_owner_deletion: bool = False) -> Any:
    owner = core.create_namespaced_config_map(namespace, {"metadata": {"name": "owner"}})
    dependent = core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {
                "name": "dependent",
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner.metadata.uid,
                        "blockOwnerDeletion": block_owner_deletion,
                    }
                ],
            }
        },
    )
    return owner, dependent


def test_background_deletion_collects_dependents(admin_client: Any, namespace: str) -> None:
    core = kubernetes.client.CoreV1Api(admin_client)
    _owner_and_dependent(core, namespace)
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Background")
    eventually(
        lambda: _exists(core.read_namespaced_config_map, "dependent", namespace) is None,
        timeout=60,
        description="the garbage collector to delete the dependent",
    )


def test_foreground_deletion_waits_for_dependents(admin_client: Any, namespace: str) -> None:
    core = kubernetes.client.CoreV1Api(admin_client)
    _owner_and_dependent(core, namespace, block_owner_deletion=True)
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Foreground")

    # The API server marks the owner at once; the garbage collector deletes it last.
    owner = _exists(core.read_namespaced_config_map, "owner", namespace)
    if owner is not None:
        assert owner.metadata.deletion_timestamp is not None
        assert "foregroundDeletion" in (owner.metadata.finalizers or [])

    def owner_gone() -> bool:
        if _exists(core.read_namespaced_config_map, "owner", namespace) is not None:
            return False
        # When the owner is gone its dependent must already be gone.
        assert _exists(core.read_namespaced_config_map, "dependent", namespace) is None
        return True

    eventually(owner_gone, timeout=60, description="foreground deletion to complete")


def test_orphan_deletion_leaves_dependents(admin_client: Any, namespace: str) -> None:
    core = kubernetes.client.CoreV1Api(admin_client)
    _, dependent = _owner_and_dependent(core, namespace)
    core.delete_namespaced_config_map("owner", namespace, propagation_policy="Orphan")
    eventually(
        lambda: _exists(core.read_namespaced_config_map, "owner", namespace) is None,
        timeout=60,
        description="the garbage collector to orphan the dependent and delete the owner",
    )
    survivor = core.read_namespaced_config_map("dependent", namespace)
    assert survivor.metadata.uid == dependent.metadata.uid
    assert not survivor.metadata.owner_references


@pytest.mark.slow
def test_namespace_deletion_completes(admin_client: Any) -> None:
    core = kubernetes.client.CoreV1Api(admin_client)
    name = "doomed"
    core.create_namespace({"metadata": {"name": name}})
    for index in range(3):
        core.create_namespaced_config_map(name, {"metadata": {"name": f"cm-{index}"}})
    core.create_namespaced_secret(name, {"metadata": {"name": "token"}, "stringData": {"k": "v"}})
    core.delete_namespace(name)
    phase = _exists(core.read_namespace, name)
    if phase is not None:
        assert phase.status.phase == "Terminating"
    eventually(
        lambda: _exists(core.read_namespace, name) is None,
        timeout=60,
        description=f"namespace {name} to finish deleting",
    )
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("cm-0", name)
    assert gone.value.status == 404


GADGET_CRD = crd("example.com", "Gadget")


def test_custom_resource_owner_is_collected_after_restart_controllers(
    shared_plane: ControlPlane, admin_client: Any, namespace: str
) -> None:
    """A CRD installed after start: restart_controllers() makes the garbage collector
    watch it, so deleting a custom-resource owner collects its dependents at once
    (without it, the next periodic rediscovery comes up to 30 s later)."""
    kubernetes.client.ApiextensionsV1Api(admin_client).create_custom_resource_definition(
        GADGET_CRD
    )
    custom = kubernetes.client.CustomObjectsApi(admin_client)
    core = kubernetes.client.CoreV1Api(admin_client)

    def create_owner() -> Any:
        try:
            return custom.create_namespaced_custom_object(
                "example.com",
                "v1",
                namespace,
                "gadgets",
                {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}},
            )
        except ApiException as error:
            if error.status == 404:  # not served yet
                return None
            raise

    owner = eventually(create_owner, timeout=30, description="the Gadget CRD to be served")
    shared_plane.restart_controllers()
    assert shared_plane.controllers == frozenset({"garbagecollector", "namespace"})
    core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {
                "name": "gadget-part",
                "ownerReferences": [
                    {
                        "apiVersion": "example.com/v1",
                        "kind": "Gadget",
                        "name": "g",
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            }
        },
    )
    custom.delete_namespaced_custom_object("example.com", "v1", namespace, "gadgets", "g")
    eventually(
        lambda: _exists(core.read_namespaced_config_map, "gadget-part", namespace) is None,
        timeout=15,  # well under the 30 s rediscovery period
        description="the garbage collector to delete the Gadget's dependent",
    )
