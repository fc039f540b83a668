"""What changed between two versions of an object, as field paths, and who wrote it.

``ktest.wait.diff`` compares an object with an expected *subset*; a write is a
symmetric change (fields added, removed, changed), so quiescence and
transition-time checks use :func:`changed_fields` instead, with the same path
syntax (``status.conditions[type=Ready].lastTransitionTime``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ktest.cluster.cluster import FIELD_MANAGER
from ktest.wait.match import diff
from ktest.wait.report import shortening_repr

IGNORED_PATHS = frozenset({"metadata.resourceVersion", "metadata.managedFields"})
"""Fields that change with every write and say nothing about what the writer did."""

_LIST_KEYS = ("type", "name")
short = shortening_repr(chars=80, items=4, depth=2)
"""A value's ``repr`` cut to a readable length."""


def changed_fields(old: Any, new: Any) -> list[str]:
    """One line per changed leaf: ``path: old -> new``, ``path: added new``, ``path: removed (was old)``."""
    out: list[str] = []
    _walk(old, new, "", out)
    return out


def changed_paths(old: Any, new: Any) -> list[str]:
    """Only the paths of :func:`changed_fields` (for counting which fields keep changing)."""
    return [line.split(": ", 1)[0] for line in changed_fields(old, new)]


def who_wrote(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The managers behind the write from ``old`` to ``new``: those whose managedFields
    entry changed, else (entries keep one-second timestamps) those owning the first
    changed field."""
    return [describe_manager(e) for e in writer_entries(old, new)]


def writer_names(old: Mapping[str, Any], new: Mapping[str, Any]) -> set[str]:
    """The bare manager names of :func:`who_wrote` (``kube-controller-manager``)."""
    return {str(e.get("manager", "?")) for e in writer_entries(old, new)}


def writer_entries(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The managedFields entries behind the write from ``old`` to ``new`` (see :func:`who_wrote`)."""
    found = _changed_entries(old, new)
    if found:
        return found
    paths = changed_paths(old, new)
    return _owner_entries(new, paths[0]) if paths else []


def field_owners(obj: Mapping[str, Any], path: str) -> set[str]:
    """The managers whose managedFields claim ``path`` (a path of :func:`changed_fields`) in ``obj``."""
    return {str(entry.get("manager", "?")) for entry in _owner_entries(obj, path)}


def _changed_entries(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The entries of ``new`` that ``old`` lacks, or holds with another time or other fields."""
    before = {_entry_key(e): _stamp(e) for e in _managed(old)}
    return [entry for entry in _managed(new) if before.get(_entry_key(entry)) != _stamp(entry)]


def _owner_entries(obj: Mapping[str, Any], path: str) -> list[Mapping[str, Any]]:
    """The entries whose managedFields claim ``path``, a field above it, or items of a
    list on the way (list items are not followed further)."""
    parts = [p.split("[", 1)[0] for p in path.split(".") if p]
    found = []
    for entry in _managed(obj):
        root: Any = entry.get("fieldsV1") or {}
        fields = root
        owned = True
        for part in parts:
            below = fields.get(f"f:{part}") if isinstance(fields, Mapping) else None
            if below is None:
                owned = (
                    fields is not root
                    and isinstance(fields, Mapping)
                    and (not fields or any(k.startswith(("k:", "v:", "i:")) for k in fields))
                )
                break
            fields = below
        if owned:
            found.append(entry)
    return found


def describe_manager(entry: Mapping[str, Any]) -> str:
    """``'name' (Update, /status)``; the test's own writes are marked ``the test``."""
    sub = entry.get("subresource")
    manager = entry.get("manager", "?")
    mine = ", the test" if manager == FIELD_MANAGER else ""
    return f"{manager!r} ({entry.get('operation', '?')}{', /' + sub if sub else ''}{mine})"


def status_writers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """managedFields entries that own something under ``status``."""
    return [e for e in _managed(obj) if "f:status" in (e.get("fieldsV1") or {})]


def _managed(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if not obj:
        return []
    return list((obj.get("metadata") or {}).get("managedFields") or [])


def _entry_key(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    return (entry.get("manager"), entry.get("operation"), entry.get("subresource"))


def _stamp(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    return (entry.get("time"), entry.get("fieldsV1"))


def _walk(old: Any, new: Any, path: str, out: list[str]) -> None:
    if path in IGNORED_PATHS:
        return
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        _walk_entries(old, new, lambda key: f"{path}.{key}" if path else str(key), out, show_removed=True)
        return
    if _is_list(old) and _is_list(new):
        key = _shared_key(old, new)
        if key is not None:  # items matched by their type or name, not their place
            before, after = ({item[key]: item for item in side} for side in (old, new))
            _walk_entries(before, after, lambda name: f"{path}[{key}={name}]", out, show_removed=False)
            return
        if len(old) != len(new):
            out.append(f"{path}: {len(old)} items -> {len(new)} items")
        for index, (a, b) in enumerate(zip(old, new, strict=False)):
            _walk(a, b, f"{path}[{index}]", out)
        return
    if old != new or type(old) is not type(new):
        out.append(f"{path or '<object>'}: {short(old)} -> {short(new)}")


def _walk_entries(
    old: Mapping[Any, Any],
    new: Mapping[Any, Any],
    child: Callable[[Any], str],
    out: list[str],
    *,
    show_removed: bool,
) -> None:
    """The entries of two mappings by key: removed, added, or walked into (``child``: a key's path)."""
    for key in list(old) + [k for k in new if k not in old]:
        path = child(key)
        if path in IGNORED_PATHS:
            continue
        if key not in new:
            out.append(f"{path}: removed" + (f" (was {short(old[key])})" if show_removed else ""))
        elif key not in old:
            out.append(f"{path}: added {short(new[key])}")
        else:
            _walk(old[key], new[key], path, out)


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _shared_key(old: Sequence[Any], new: Sequence[Any]) -> str | None:
    """``type`` or ``name`` when every item of both lists is a mapping with a unique one."""
    items = list(old) + list(new)
    if not items or not all(isinstance(i, Mapping) for i in items):
        return None
    for key in _LIST_KEYS:
        if all(key in i for i in items) and all(
            len({i[key] for i in side}) == len(side) for side in (old, new)
        ):
            return key
    return None


def status_write_notes(obj: Mapping[str, Any]) -> list[str]:
    """Who wrote status, per managedFields, and the classic mistake when nobody did."""
    entries = status_writers(obj)
    if not entries:
        return [
            "managedFields show no write of status by anyone. If the controller writes status "
            "through the main resource, the API server drops it silently when the kind has a "
            "status subresource: write it through /status (e.g. cluster.patch(obj, ..., "
            "subresource='status'), patch_namespaced_custom_object_status, r.Status().Patch)"
        ]
    return [
        "status written by " + ", ".join(f"{describe_manager(e)} at {e.get('time', '?')}" for e in entries)
    ]


# ------------------------------------------------------------------ conversion round trips

_SERVER_SIDE_METADATA = ("resourceVersion", "managedFields", "generation", "uid", "creationTimestamp")
_MISSING_LINE = re.compile(r"^(?P<path>.*?): missing, expected (?P<value>.*?)(?: \(present: .*\))?$")
_CHANGED_LINE = re.compile(r"^(?P<path>.*?): expected (?P<before>.*), got (?P<after>.*)$")


def round_trip_changes(original: Mapping[str, Any], back: Mapping[str, Any]) -> list[str]:
    """Each field a conversion round trip lost, changed or added, ignoring the metadata the
    server sets on every write."""
    before, after = _comparable(original), _comparable(back)
    changes = [round_trip_wording(line) for line in diff(after, before)]
    for line in diff(before, after):  # diff() checks only what its expected side holds
        added = _MISSING_LINE.match(line)
        if added:
            changes.append(f"{added.group('path')}: added by the round trip ({added.group('value')})")
    return changes


def round_trip_wording(line: str) -> str:
    """diff()'s 'expected X, got Y' (expected: the original) in round-trip terms."""
    lost = _MISSING_LINE.match(line)
    if lost:
        return f"{lost.group('path')}: lost (was {lost.group('value')})"
    changed = _CHANGED_LINE.match(line)
    if changed:
        before, after = changed.group("before"), changed.group("after")
        return f"{changed.group('path')}: was {before}, came back as {after}"
    return line


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_SIDE_METADATA}
    return {**{k: v for k, v in obj.items() if k != "metadata"}, "metadata": meta}
