"""Find RBAC denials in an operator's output.

The API server words every RBAC refusal the same way, and every client
library (client-go, kopf, the Python client) passes that text on to its logs
or exceptions::

    configmaps "x" is forbidden: User "op" cannot create resource "configmaps"
    in API group "" in the namespace "ns"

so a least-privilege run can name the missing verb and resource whatever the
operator is written in. Quotes may arrive escaped (JSON logs, reprs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_Q = r'\\*"'  # a quote, possibly escaped once or more
_DENIAL = re.compile(
    rf"User {_Q}(?P<user>[^\"\\]*){_Q} cannot (?P<verb>[a-z]+) "
    rf"resource {_Q}(?P<resource>[^\"\\]+){_Q} in API group {_Q}(?P<group>[^\"\\]*){_Q}"
    rf"(?: in the namespace {_Q}(?P<namespace>[^\"\\]+){_Q}| at the cluster scope)?"
)


@dataclass(frozen=True)
class Denial:
    """One request the API server refused for lack of RBAC permission."""

    user: str
    verb: str
    resource: str
    group: str
    namespace: str | None
    line: str

    @property
    def where(self) -> str:
        return f'in namespace "{self.namespace}"' if self.namespace else "at cluster scope"

    def describe(self) -> str:
        group = f'API group "{self.group}"' if self.group else "core API group"
        return f'user "{self.user}" may not {self.verb} {self.resource} ({group}) {self.where}'

    def missing_rule(self) -> str:
        """The RBAC rule that would allow the request, as YAML flow text."""
        return f'{{apiGroups: ["{self.group}"], resources: ["{self.resource}"], verbs: ["{self.verb}"]}}'


def find_denials(text: str) -> list[Denial]:
    """Every RBAC denial in ``text``, in order, one per line at most."""
    return [
        Denial(**match.groupdict(), line=line.strip())
        for line in text.splitlines()
        if (match := _DENIAL.search(line))
    ]
