"""Least-privilege rules from needs: a ClusterRole for what was needed cluster-wide, a Role for
what was needed only inside namespaces (bind it in each namespace the operator serves); resources
that need the same verbs share a rule, as controller-gen writes them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from ktest.proxy.api_request import VERBS
from ktest.rbac_audit.needs import Need

RBAC_API = "rbac.authorization.k8s.io/v1"
DERIVED_NAME = "ktest-derived"


def derived_rules(needs: Iterable[Need], *, cluster_wide: bool) -> list[dict[str, Any]]:
    """The fewest rules granting exactly ``needs`` of one scope. ``cluster_wide=False``: the
    needs met inside namespaces that no cluster-wide need already covers."""
    chosen = set(needs)
    wide = {_grant(need) for need in chosen if need.cluster_wide}
    verbs: dict[tuple[str, str], set[str]] = {}
    for need in chosen:
        if need.cluster_wide != cluster_wide or (not cluster_wide and _grant(need) in wide):
            continue
        verbs.setdefault((need.group, need.resource_path), set()).add(need.verb)
    shared: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, resource), granted in verbs.items():
        shared.setdefault((group, _ordered(granted)), []).append(resource)
    rules = [
        {"apiGroups": [group], "resources": sorted(resources), "verbs": list(granted)}
        for (group, granted), resources in shared.items()
    ]
    return sorted(rules, key=lambda rule: (rule["apiGroups"], rule["resources"]))


def derived_roles(needs: Iterable[Need], name: str = DERIVED_NAME) -> list[dict[str, Any]]:
    """The ClusterRole and the Role (each only if it has rules) granting ``needs``."""
    chosen = list(needs)
    roles = []
    for kind, wide in (("ClusterRole", True), ("Role", False)):
        rules = derived_rules(chosen, cluster_wide=wide)
        if rules:
            roles.append({"apiVersion": RBAC_API, "kind": kind, "metadata": {"name": name}, "rules": rules})
    return roles


def derived_yaml(needs: Iterable[Need], name: str = DERIVED_NAME) -> str:
    """:func:`derived_roles` as YAML documents, with a line saying what each is for."""
    roles = derived_roles(needs, name)
    if not roles:
        return "# no operator request was recorded: no rule is needed\n"
    head = ("# Least-privilege rules derived by ktest from the operator requests it recorded.\n"
            "# ClusterRole: bind it cluster-wide; Role: bind it in each namespace the operator serves.\n")
    return head + yaml.safe_dump_all(roles, sort_keys=False, default_flow_style=None, width=100)


def _grant(need: Need) -> tuple[str, str, str]:
    return (need.group, need.resource_path, need.verb)


def _ordered(verbs: set[str]) -> tuple[str, ...]:
    return tuple(sorted(verbs, key=lambda verb: (VERBS.index(verb) if verb in VERBS else len(VERBS), verb)))
