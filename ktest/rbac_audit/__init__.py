"""An add-on: RBAC checked both ways. Every request the operators' proxies record across a session
(all xdist workers, all CI shards merged) becomes the least-privilege rules it needed; the
operator's shipped roles are judged against them: a missing rule fails the session with the
request that needed it, unused and wildcard rules are listed. The plugin turns it on with
``ktest_rbac = path``; ``ktest rbac report FILES...`` prints the derived rules. The core never
imports it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ktest.lazy import lazy_attributes

if TYPE_CHECKING:
    from ktest.rbac_audit.compare import RbacComparison as RbacComparison
    from ktest.rbac_audit.compare import ShippedRule as ShippedRule
    from ktest.rbac_audit.compare import compare_rules as compare_rules
    from ktest.rbac_audit.compare import shipped_rules as shipped_rules
    from ktest.rbac_audit.derive import derived_roles as derived_roles
    from ktest.rbac_audit.derive import derived_yaml as derived_yaml
    from ktest.rbac_audit.needs import Need as Need
    from ktest.rbac_audit.needs import RbacAuditError as RbacAuditError
    from ktest.rbac_audit.needs import RequestRecord as RequestRecord

_NAMES_BY_MODULE = {
    "compare": ("RbacComparison", "ShippedRule", "compare_rules", "shipped_rules"),
    "derive": ("derived_roles", "derived_yaml"),
    "needs": ("Need", "RbacAuditError", "RequestRecord"),
}
_EXPORTS = {
    name: f"ktest.rbac_audit.{module}" for module, names in _NAMES_BY_MODULE.items() for name in names
}

__all__ = sorted(_EXPORTS)

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
