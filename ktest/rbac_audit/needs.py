"""What an operator's requests needed from RBAC: one :class:`Need` per (API group, resource,
subresource, verb, scope), with the evidence (how often, the first request, the operator and
the test that sent it), merged across processes through JSON files."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ktest.base.procfs import write_private_file
from ktest.errors import KtestError
from ktest.proxy.api_request import VERBS, ApiRequest, resource_path

if TYPE_CHECKING:
    from ktest.proxy.traffic import Traffic

FORMAT = "ktest-rbac-requests/1"
MAX_NAMES = 100
"""Object names kept per need (a rule with ``resourceNames`` is judged against them)."""


class RbacAuditError(KtestError):
    """A record file or a roles manifest the RBAC audit cannot use."""


@dataclass(frozen=True, order=True)
class Need:
    """One permission a request needed. ``cluster_wide``: it was sent outside any namespace (a
    cluster-scoped resource, or a list/watch across all namespaces), which only a ClusterRole
    bound cluster-wide grants."""

    group: str
    resource: str
    subresource: str
    verb: str
    cluster_wide: bool

    @property
    def resource_path(self) -> str:
        """``deployments/status`` as RBAC rules spell it."""
        return resource_path(self.resource, self.subresource)

    def describe(self) -> str:
        group = f"API group {self.group!r}" if self.group else "core API group"
        scope = "cluster-wide" if self.cluster_wide else "in a namespace"
        return f"{self.verb} {self.resource_path} ({group}) {scope}"

    def rule_text(self) -> str:
        return f'{{apiGroups: ["{self.group}"], resources: ["{self.resource_path}"], verbs: ["{self.verb}"]}}'


@dataclass
class Evidence:
    """The requests behind a need: how many, the first one, who sent it during which test."""

    count: int
    example: str
    operator: str
    test: str | None
    names: set[str | None] = field(default_factory=set)
    """Object names requested (None: a request naming no object, e.g. a list)."""
    names_complete: bool = True
    """False once more than :data:`MAX_NAMES` names were seen (then only some are kept)."""

    def describe(self) -> str:
        where = f" in {self.test}" if self.test else ""
        more = f" (+{self.count - 1} more like it)" if self.count > 1 else ""
        return f"{self.example}{more}, by operator {self.operator!r}{where}"

    def add_name(self, name: str | None) -> None:
        if name in self.names:
            return
        if len(self.names) >= MAX_NAMES:
            self.names_complete = False
            return
        self.names.add(name)


def need_of(request: ApiRequest) -> Need | None:
    """The need behind ``request``; None for what RBAC does not judge by resource (discovery,
    ``/version``, a path the API server refuses unread)."""
    if not request.resource or request.problem is not None or request.verb not in VERBS:
        return None
    return Need(request.group, request.resource, request.subresource or "", request.verb,
                request.namespace is None)


class RequestRecord:
    """Every need seen, with its evidence; thread-safe, merged from other records or files."""

    def __init__(self) -> None:
        self._needs: dict[Need, Evidence] = {}
        self._lock = threading.Lock()

    def add(self, operator: str, request: ApiRequest, test: str | None = None) -> None:
        need = need_of(request)
        if need is None:
            return
        with self._lock:
            evidence = self._needs.get(need)
            if evidence is None:
                evidence = self._needs[need] = Evidence(0, request.verb_and_target(), operator, test)
            evidence.count += 1
            evidence.add_name(request.name)

    @classmethod
    def from_traffic(cls, traffic: Traffic, test: str | None = None) -> RequestRecord:
        """The needs of one operator's recorded calls (``op.traffic``), for a check in one test."""
        record = cls()
        for call in traffic.calls():
            record.add(traffic.name, call.request, test)
        return record

    def needs(self) -> dict[Need, Evidence]:
        with self._lock:
            return dict(sorted(self._needs.items()))

    def __len__(self) -> int:
        return len(self._needs)

    def merge(self, other: RequestRecord) -> None:
        for need, theirs in other.needs().items():
            with self._lock:
                mine = self._needs.get(need)
                if mine is None:
                    self._needs[need] = Evidence(theirs.count, theirs.example, theirs.operator, theirs.test,
                                                 set(theirs.names), theirs.names_complete)
                    continue
                mine.count += theirs.count
                mine.names_complete &= theirs.names_complete
                for name in theirs.names:
                    mine.add_name(name)

    # ------------------------------------------------------------ files

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "needs": [
            {"group": n.group, "resource": n.resource, "subresource": n.subresource, "verb": n.verb,
             "cluster_wide": n.cluster_wide, "count": e.count, "example": e.example,
             "operator": e.operator, "test": e.test,
             "names": sorted(e.names, key=lambda name: (name is not None, name or "")),
             "names_complete": e.names_complete}
            for n, e in self.needs().items()
        ]}

    def write(self, path: Path) -> Path:
        """Write the record to ``path``, private (0600 in 0700 directories: it names objects)."""
        write_private_file(path, json.dumps(self.to_json(), indent=1) + "\n")
        return path

    @classmethod
    def read(cls, path: Path) -> RequestRecord:
        """A record written by :meth:`write`; a file that is not one is an :class:`RbacAuditError`."""
        try:
            data = json.loads(Path(path).read_text())
        except OSError as error:
            why = error.strerror or error
            raise RbacAuditError(f"{path}: cannot read the RBAC request record: {why}") from None
        except ValueError as error:
            raise RbacAuditError(
                f"{path}: not an RBAC request record ({error}); pass the requests.json files a "
                "session with ktest_rbac wrote (<artifacts>/rbac/requests.json)"
            ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise RbacAuditError(
                f"{path}: not an RBAC request record (no \"format\": \"{FORMAT}\"); pass the "
                "requests.json files a session with ktest_rbac wrote (<artifacts>/rbac/requests.json)"
            )
        record = cls()
        for index, item in enumerate(data.get("needs") or []):
            try:
                need = Need(str(item["group"]), str(item["resource"]), str(item["subresource"]),
                            str(item["verb"]), bool(item["cluster_wide"]))
                evidence = Evidence(int(item["count"]), str(item["example"]), str(item["operator"]),
                                    item.get("test"), set(item.get("names") or []),
                                    bool(item.get("names_complete", True)))
            except (KeyError, TypeError, ValueError) as error:
                raise RbacAuditError(
                    f"{path}: need {index + 1} is incomplete ({error}); the file is damaged: "
                    "write it again with a ktest_rbac session"
                ) from None
            record._needs[need] = evidence
        return record


def merged(paths: Iterable[Path]) -> RequestRecord:
    """One record holding every file's needs (xdist workers', CI shards')."""
    record = RequestRecord()
    for path in paths:
        record.merge(RequestRecord.read(path))
    return record
