"""What version B changed on the objects version A left: per object B wrote (from B's proxy
record), the fields that differ between the state A converged to and the state B converged to.
A write of the object's status counts for ``status``, a write of the object for the rest, and a
field only Kubernetes' own controllers own (a Deployment's revision annotation) for none, so that
what other controllers change meanwhile is not laid at B's door."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ktest.assertions.changes import changed_fields, field_owners
from ktest.assertions.quiescence import SYSTEM_WRITERS
from ktest.operator_upgrade.snapshot import ObjectKey, is_bookkeeping

if TYPE_CHECKING:
    from ktest.proxy.traffic import Call

Objects = Mapping[ObjectKey, Mapping[str, Any]]
_NOISE = ("metadata.generation",)
"""Fields the API server changes along with any other change (said by the change itself)."""


@dataclass(frozen=True)
class ObjectChange:
    """One object version B changed: ``changed`` (with ``fields``), ``created`` or ``deleted``."""

    key: ObjectKey
    change: str
    fields: tuple[str, ...]
    """``spec.template.metadata.labels.version: added '2'`` lines (see ``changed_fields``)."""
    writes: tuple[str, ...]
    """B's requests that wrote it."""

    @property
    def paths(self) -> list[str]:
        return [line.split(": ", 1)[0] for line in self.fields]

    def describe(self) -> str:
        head = f"{self.key.describe()}: {self.change}"
        if self.fields:
            return head + "\n" + "\n".join(f"    {line}" for line in self.fields)
        return head


def _identity(key: ObjectKey) -> tuple[str, str, str | None, str]:
    return (key.group, key.resource, key.namespace, key.name)


def written_objects(
    writes: Iterable[Call], before: Objects, after: Objects
) -> dict[tuple[str, str, str | None, str], tuple[set[str], list[Call]]]:
    """Each object the writes touched -> (the parts written: ``object``, ``status``..., the calls).
    A create names no object: the objects of its resource and namespace that A's state lacks."""
    touched: dict[tuple[str, str, str | None, str], tuple[set[str], list[Call]]] = {}
    was = {_identity(key) for key in before}
    now = {_identity(key) for key in after}
    for call in writes:
        request = call.request
        if not request.resource or is_bookkeeping(request):
            continue
        if request.name is not None:
            targets = [(request.group, request.resource, request.namespace, request.name)]
        else:  # create, deletecollection: what appeared or vanished in that collection
            targets = [identity for identity in was ^ now
                       if identity[:3] == (request.group, request.resource, request.namespace)]
        for identity in targets:
            parts, calls = touched.setdefault(identity, (set(), []))
            parts.add(request.subresource or "object")
            calls.append(call)
    return touched


def object_changes(
    writes: Iterable[Call], before: Objects, after: Objects, origin: float = 0.0
) -> list[ObjectChange]:
    """The changes B's ``writes`` made, judged between ``before`` (A converged) and ``after``."""
    old = {_identity(key): (key, obj) for key, obj in before.items()}
    new = {_identity(key): (key, obj) for key, obj in after.items()}
    changes = []
    for identity, (parts, calls) in sorted(written_objects(writes, before, after).items(), key=str):
        shown = tuple(call.describe(origin) for call in calls)
        was, now = old.get(identity), new.get(identity)
        if was is None and now is None:
            continue
        if was is None:
            assert now is not None
            changes.append(ObjectChange(now[0], "created", (), shown))
            continue
        if now is None:
            changes.append(ObjectChange(was[0], "deleted", (), shown))
            continue
        fields = tuple(line for line in changed_fields(was[1], now[1]) if _attributed(line, parts, now[1]))
        if fields:
            changes.append(ObjectChange(now[0], "changed", fields, shown))
    return changes


def _owners(obj: Mapping[str, Any], path: str) -> set[str]:
    """Who owns ``path`` in ``obj``'s managedFields; a label's or annotation's key may hold dots."""
    for part in ("labels", "annotations"):
        prefix = f"metadata.{part}."
        if path.startswith(prefix):
            key = f"f:{path[len(prefix):]}"
            entries = (obj.get("metadata") or {}).get("managedFields") or []
            return {
                str(entry.get("manager", "?")) for entry in entries
                if key in (((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get(f"f:{part}") or {})
            }
    return field_owners(obj, path)


def _attributed(line: str, parts: set[str], obj: Mapping[str, Any]) -> bool:
    path = line.split(": ", 1)[0]
    owners = _owners(obj, path)
    if path in _NOISE or (owners and owners <= SYSTEM_WRITERS):
        return False
    in_status = path == "status" or path.startswith(("status.", "status["))
    return ("status" in parts) if in_status else ("object" in parts or bool(parts - {"status"}))
