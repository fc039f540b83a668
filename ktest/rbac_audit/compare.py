"""The operator's shipped roles against what its requests needed: a missing rule (a request the
roles refuse: a 403 in production), a rule nothing used, a wildcard rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ktest.operators.rbac import load_roles
from ktest.rbac_audit.derive import derived_rules
from ktest.rbac_audit.needs import Evidence, Need

if TYPE_CHECKING:
    from ktest.cluster.manifests import ManifestSource

WILDCARD = "*"


@dataclass(frozen=True)
class ShippedRule:
    """One rule of a shipped Role or ClusterRole, and where it is written."""

    role: str
    """``ClusterRole manager-role``."""
    where: str
    """``config/rbac/role.yaml, document 1 (line 1), rule 2 (line 12)``."""
    rule: Mapping[str, Any]
    cluster_wide: bool
    """A ClusterRole (taken as bound cluster-wide); a Role grants inside namespaces only."""

    def _list(self, key: str) -> list[str]:
        return [str(item) for item in self.rule.get(key) or []]

    @property
    def is_wildcard(self) -> bool:
        return WILDCARD in self._list("apiGroups") + self._list("verbs") or any(
            WILDCARD in resource for resource in self._list("resources")
        )

    def grants(self, need: Need, evidence: Evidence | None = None) -> bool:
        """Whether the API server's RBAC authorizer lets this rule allow ``need`` (its matching:
        ``*`` anywhere, ``*/status`` for a subresource, ``resourceNames`` for named requests)."""
        if need.cluster_wide and not self.cluster_wide:
            return False
        groups, verbs = self._list("apiGroups"), self._list("verbs")
        if not (WILDCARD in groups or need.group in groups) or not (WILDCARD in verbs or need.verb in verbs):
            return False
        if not any(_resource_matches(resource, need) for resource in self._list("resources")):
            return False
        names = set(self._list("resourceNames"))
        if not names:
            return True
        return evidence is not None and evidence.names_complete and None not in evidence.names and (
            {name for name in evidence.names if name is not None} <= names
        )

    def grants_named(self) -> list[tuple[str, str, str]]:
        """The (group, resource, verb) triples this rule names outright (wildcards left out)."""
        return [
            (group, resource, verb)
            for group in self._list("apiGroups") if group != WILDCARD
            for resource in self._list("resources") if WILDCARD not in resource
            for verb in self._list("verbs") if verb != WILDCARD
        ]

    def describe(self) -> str:
        shown = {key: self.rule[key] for key in ("apiGroups", "resources", "resourceNames", "verbs")
                 if self.rule.get(key)}
        return f"{self.role} ({self.where}): {_flow(shown)}"


def _resource_matches(resource: str, need: Need) -> bool:
    if resource in (WILDCARD, need.resource_path):
        return True
    return bool(need.subresource) and resource == f"*/{need.subresource}"


def _flow(value: Mapping[str, Any]) -> str:
    """A rule on one line, as YAML's flow style writes it (the core group as ``""``)."""

    def item(entry: Any) -> str:
        return '""' if entry == "" else str(entry)

    return "{" + ", ".join(f"{key}: [{', '.join(map(item, items))}]" for key, items in value.items()) + "}"


def shipped_rules(source: ManifestSource) -> list[ShippedRule]:
    """Every rule of the Roles and ClusterRoles in ``source`` (files, directories: kubebuilder's
    ``config/rbac``, a kopf RBAC file, a rendered Helm chart; other objects are skipped). A file
    that does not parse is a ManifestError naming it and the line."""
    rules = []
    for manifest in load_roles(source, skip_other_kinds=True):
        for index, rule in enumerate(manifest.obj.get("rules") or []):
            line = manifest.line_of(("rules", index))
            where = f"{manifest.origin}, rule {index + 1}" + (f" (line {line})" if line else "")
            rules.append(ShippedRule(manifest.ref_text, where, rule, manifest.obj["kind"] == "ClusterRole"))
    return rules


@dataclass
class RbacComparison:
    """What the requests needed that no rule grants, which rules nothing used, which are wildcards."""

    missing: list[tuple[Need, Evidence]] = field(default_factory=list)
    unused: list[tuple[ShippedRule, list[str]]] = field(default_factory=list)
    """Each rule with the grants it names that no request used (all of them: the whole rule)."""
    wildcards: list[tuple[ShippedRule, list[Need]]] = field(default_factory=list)
    """Each wildcard rule with the needs it met (what to list instead)."""

    @property
    def ok(self) -> bool:
        """No rule missing (unused and wildcard rules are listed, not failed)."""
        return not self.missing

    def describe(self) -> str:
        lines: list[str] = []
        if self.missing:
            lines.append(f"{len(self.missing)} missing RBAC rule(s): the shipped roles refuse these requests "
                         "(a 403 in production):")
            for need, evidence in self.missing:
                lines.append(f"  missing: {need.describe()}; needed by {evidence.describe()}")
                lines.append(f"    add the rule {need.rule_text()}")
        for rule, unused in self.unused:
            lines.append(f"unused rule: {rule.describe()}: no request used {', '.join(unused)}")
        for rule, needs in self.wildcards:
            wide = [dataclasses.replace(need, cluster_wide=True) for need in needs]
            used = "; ".join(_flow(rule) for rule in derived_rules(wide, cluster_wide=True)) or "nothing"
            lines.append(f"wildcard rule: {rule.describe()} grants '*'; the requests needed only: {used}")
        return "\n".join(lines) or "the shipped roles grant exactly what the operator's requests needed"


def compare_rules(needs: Mapping[Need, Evidence], rules: list[ShippedRule]) -> RbacComparison:
    """Judge ``rules`` against ``needs`` (see :class:`RbacComparison`)."""
    result = RbacComparison()
    for need, evidence in needs.items():
        if not any(rule.grants(need, evidence) for rule in rules):
            result.missing.append((need, evidence))
    for rule in rules:
        met = [need for need, evidence in needs.items() if rule.grants(need, evidence)]
        if rule.is_wildcard:
            result.wildcards.append((rule, met))
            continue
        used = {(need.group, need.resource_path, need.verb) for need in met}
        unused = [f"{verb} {resource}" + (f" ({group})" if group else "")
                  for group, resource, verb in rule.grants_named() if (group, resource, verb) not in used]
        if unused:
            result.unused.append((rule, unused))
    return result
