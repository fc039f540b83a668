"""Least privilege: run the operator as a user holding only the RBAC its manifests grant.

``operator_identity(cluster, "config/rbac/role.yaml", user="my-operator")``
creates the roles found there (kubebuilder's ClusterRole ``manager-role``,
and any namespaced Roles) under names private to that user, binds them to
the user (cluster-wide, or per namespace with ``namespaces=[...]``), waits
until the API server's authorizer applies the grant, and returns the
cluster as seen by that user (a client-certificate kubeconfig). Run the
operator with that cluster; a request its role does not allow is refused
with 403 exactly as in production, and the operator handle turns the
refusal in its output into a failure naming the verb and resource.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ktest.errors import ClusterError, ManifestError

if TYPE_CHECKING:
    from ktest.cluster import Cluster
    from ktest.cluster.manifests import Manifest, ManifestSource

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"
# Present in kubebuilder's config/rbac directory but meaningful only in a real deployment.
_DEPLOYMENT_KINDS = frozenset({"ServiceAccount", "ClusterRoleBinding", "RoleBinding"})
_MAX_NAME = 253


@dataclass
class OperatorIdentity:
    """A user bound to an operator's roles; ``cluster`` is the API seen as that user."""

    user: str
    cluster: Cluster
    admin: Cluster
    objects: list[dict[str, Any]] = field(default_factory=list)
    grants: list[tuple[dict[str, Any], str | None]] = field(default_factory=list)
    """Each granted rule with the namespace it applies in (None: cluster-wide)."""

    @property
    def kubeconfig(self) -> Any:
        return self.cluster.kubeconfig

    def revoke(self) -> None:
        """Delete the bindings and roles created for this user (in reverse order)."""
        for obj in reversed(self.objects):
            self.admin.delete(obj, missing_ok=True)
        self.objects.clear()

    def __enter__(self) -> OperatorIdentity:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.revoke()


def load_roles(source: ManifestSource, *, skip_other_kinds: bool = False) -> list[Manifest]:
    """The ClusterRoles and Roles in ``source``; bindings and ServiceAccounts are skipped, and
    with ``skip_other_kinds`` every other object too (a rendered Helm chart's Deployment)."""
    from ktest.cluster.manifests import load_located

    roles = []
    for manifest in load_located(source):
        kind = manifest.obj.get("kind")
        api_version = manifest.obj.get("apiVersion")
        if kind in _DEPLOYMENT_KINDS or (skip_other_kinds and kind not in ("ClusterRole", "Role")):
            continue
        if kind not in ("ClusterRole", "Role") or api_version != RBAC_API:
            raise ManifestError(
                f"{manifest.origin}: {api_version} {kind} is not an RBAC role. Pass the operator's role "
                "manifests (e.g. kubebuilder's config/rbac/role.yaml) holding ClusterRole or Role objects."
            )
        if manifest.obj.get("aggregationRule"):
            raise ManifestError(
                f"{manifest.origin}: {manifest.ref_text} aggregates other roles (aggregationRule); "
                "ktest binds the rules written in the file, so list the rules directly."
            )
        roles.append(manifest)
    if not roles:
        raise ManifestError(
            f"no ClusterRole or Role found in {source!s:.200}; pass the file holding the operator's "
            "roles (kubebuilder: config/rbac/role.yaml)."
        )
    return roles


def operator_identity(
    cluster: Cluster,
    rbac: ManifestSource,
    *,
    user: str = "ktest-operator",
    groups: Sequence[str] = (),
    namespaces: Sequence[str] | None = None,
    timeout: float = 30.0,
) -> OperatorIdentity:
    """Create the roles in ``rbac`` for ``user``, bind them, and return the user's view of the cluster.

    ClusterRoles are bound cluster-wide, or with a RoleBinding in each of
    ``namespaces``; Roles are created in each of ``namespaces`` (or their own
    namespace) and bound there. Use the result as a context manager to remove
    the grant again.
    """
    if isinstance(namespaces, str):
        raise ClusterError(f"namespaces must be a list such as [{namespaces!r}], not a string.")
    roles = load_roles(rbac)
    identity = OperatorIdentity(user=user, cluster=cluster.user(user, groups), admin=cluster)
    try:
        for manifest in roles:
            _grant(identity, manifest, namespaces)
        _wait_effective(identity, groups, timeout)
    except BaseException:
        identity.revoke()
        raise
    return identity


def _grant(identity: OperatorIdentity, manifest: Manifest, namespaces: Sequence[str] | None) -> None:
    role = manifest.obj
    original = role["metadata"]["name"]
    name = _private_name(identity.user, original)
    rules = role.get("rules") or []
    if role["kind"] == "ClusterRole":
        _create(identity, _rbac_object("ClusterRole", name, None, identity, rules=rules))
        if namespaces is None:
            _create(identity, _binding("ClusterRoleBinding", name, None, "ClusterRole", identity))
            identity.grants.extend((rule, None) for rule in rules)
        else:
            for namespace in namespaces:
                _create(identity, _binding("RoleBinding", name, namespace, "ClusterRole", identity))
                identity.grants.extend((rule, namespace) for rule in rules)
        return
    targets = list(namespaces) if namespaces is not None else [role["metadata"].get("namespace")]
    for namespace in targets:
        if not namespace:
            raise ManifestError(
                f"{manifest.origin}: Role {original} has no namespace; set metadata.namespace "
                "or pass namespaces=[...]."
            )
        _create(identity, _rbac_object("Role", name, namespace, identity, rules=rules))
        _create(identity, _binding("RoleBinding", name, namespace, "Role", identity))
        identity.grants.extend((rule, namespace) for rule in rules)


def _binding(
    kind: str, name: str, namespace: str | None, role_kind: str, identity: OperatorIdentity
) -> dict[str, Any]:
    return _rbac_object(
        kind,
        name,
        namespace,
        identity,
        roleRef={"apiGroup": RBAC_GROUP, "kind": role_kind, "name": name},
        subjects=[{"apiGroup": RBAC_GROUP, "kind": "User", "name": identity.user}],
    )


def _rbac_object(
    kind: str, name: str, namespace: str | None, identity: OperatorIdentity, **content: Any
) -> dict[str, Any]:
    """A role or binding for ``identity``, labelled as ktest's."""
    labels = {"app.kubernetes.io/managed-by": "ktest", "ktest.dev/operator-user": _label_value(identity.user)}
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": RBAC_API, "kind": kind, "metadata": metadata, **content}


def _create(identity: OperatorIdentity, obj: dict[str, Any]) -> None:
    identity.admin.apply(obj)
    identity.objects.append(obj)


def _label_value(text: str) -> str:
    cleaned = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)[:63]
    return cleaned.strip("-_.") or "user"


def _private_name(user: str, name: str) -> str:
    safe_user = "".join(ch if ch.isalnum() or ch in "-." else "-" for ch in user.lower()).strip("-.")
    return f"ktest-{safe_user}-{name}"[:_MAX_NAME]


def _wait_effective(identity: OperatorIdentity, groups: Sequence[str], timeout: float) -> None:
    """Poll SubjectAccessReviews until the authorizer grants one request per rule."""
    probes = [probe for rule, ns in identity.grants if (probe := _probe(rule, ns)) is not None]
    deadline = time.monotonic() + timeout
    for attributes in probes:
        while not _allowed(identity, groups, attributes):
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"the RBAC grant for user {identity.user!r} was created but the API server still "
                    f"refuses {attributes} after {timeout:g} s; check the role's rules."
                )
            time.sleep(0.05)


def _probe(rule: dict[str, Any], namespace: str | None) -> dict[str, Any] | None:
    verbs, resources = rule.get("verbs") or [], rule.get("resources") or []
    if not verbs or not resources:
        return None  # nonResourceURLs, or an empty rule
    resource, _, subresource = str(resources[0]).partition("/")
    attributes: dict[str, Any] = {
        "verb": verbs[0],
        "group": (rule.get("apiGroups") or [""])[0],
        "resource": resource,
    }
    if subresource:
        attributes["subresource"] = subresource
    if rule.get("resourceNames"):
        attributes["name"] = rule["resourceNames"][0]
    if namespace:
        attributes["namespace"] = namespace
    return attributes


def _allowed(identity: OperatorIdentity, groups: Sequence[str], attributes: dict[str, Any]) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": identity.user, "groups": list(groups), "resourceAttributes": attributes},
    }
    answer = identity.admin.rest.request(
        "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review
    )
    return bool((answer.get("status") or {}).get("allowed"))
