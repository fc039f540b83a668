"""The status subresource and ``status.observedGeneration``.

Rules (design document 004, "Status Subresource"): with a status subresource
the API server serves ``/status``, ignores ``status`` in writes to the main
resource and ``spec`` in writes to ``/status``, and a status write never bumps
``metadata.generation``. A controller writes status through ``/status`` and sets
``status.observedGeneration`` to the generation it acted on. Conditions are
``ktest.assertions.conditions``.
"""

from __future__ import annotations

import copy
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ktest.assertions.changes import status_write_notes
from ktest.assertions.objects import crd_of, describe, failure, read_existing, timeout_or_default, uid_of
from ktest.assertions.objects import field as get_field
from ktest.assertions.waiting import until_read
from ktest.cluster.refs import ObjectRef, RefLike, as_ref
from ktest.errors import ClusterError
from ktest.errors.api import ApiError
from ktest.wait.match import diff

if TYPE_CHECKING:
    from ktest.cluster.cluster import Cluster

RULE_SUBRESOURCE = (
    "a kind with a status subresource serves /status; writes to the main resource ignore status, "
    "writes to /status ignore spec, and a status write never changes metadata.generation "
    "(CRDs: spec.versions[].subresources.status: {})"
)
RULE_OBSERVED = (
    "a controller reports the generation it acted on in status.observedGeneration, written through "
    "the status subresource; until it equals metadata.generation nobody can tell whether the "
    "latest spec was handled"
)

Probe = Mapping[str, Any]


# --------------------------------------------------------------- status subresource


@dataclass
class StatusSubresourceReport:
    """What :func:`assert_status_subresource` checked, and with which probe writes."""

    obj: str
    served: bool
    status_probe: dict[str, Any] = field(default_factory=dict)
    spec_probe: dict[str, Any] | None = None
    checked: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def assert_status_subresource(
    cluster: Cluster,
    obj: RefLike,
    *,
    status_probe: Probe | None = None,
    spec_probe: Probe | None = None,
) -> StatusSubresourceReport:
    """``obj``'s kind serves ``/status`` and the API server enforces it, shown by real writes:
    status through the main resource is ignored, spec through ``/status`` is ignored, a
    status write leaves ``metadata.generation`` alone.

    The probes are merge-patch fragments of ``status`` and ``spec`` (for example
    ``{"phase": "probe"}``); by default they are derived from the CRD's schema (a
    string, number or boolean field that accepts another value). Every probe value
    that got stored is put back afterwards. Run it on an object no controller is
    busy with, since controllers see the probe writes.
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    before = read_existing(cluster, ref, purpose="probe its status subresource")
    name = describe(ref, uid_of(before))
    info = cluster.info(ref.api_version, ref.kind)
    schema = _crd_schema(cluster, ref)
    status, spec = (
        dict(given) if given is not None else _derived_probe(schema, section, before.get(section))
        for section, given in (("status", status_probe), ("spec", spec_probe))
    )
    if status is None and not _keeps_nothing(schema, "status"):
        raise ClusterError(
            f"cannot probe the status subresource of {name}: its schema has no status field ktest "
            "can write a test value to; pass status_probe={'someStatusField': <value>}"
        )
    for section, probe in (("status", status), ("spec", spec)):
        if probe is not None and not diff(before.get(section) or {}, probe):
            raise ClusterError(
                f"{section}_probe {probe!r} already matches {name}'s {section}: choose values that differ "
                "from the current ones, or the probe cannot show whether a write was ignored"
            )
    report = StatusSubresourceReport(str(ref), "status" in info.subresources, status or {}, spec)
    violations: list[str] = []
    generation = before["metadata"].get("generation")
    no_status_field = (
        "the schema keeps no field of status (no properties, additionalProperties or "
        "x-kubernetes-preserve-unknown-fields), so no status value can be stored"
    )

    if status is None:
        report.skipped.append(f"status written through the main resource: {no_status_field}")
    else:
        answer = _probe_write(cluster, ref, {"status": status}, None, name)
        report.checked.append("status written through the main resource is ignored")
        if not diff(answer.get("status") or {}, status):
            violations.append(f"a merge patch of status {status!r} to the main resource was stored")
            if answer["metadata"].get("generation") != generation:
                violations.append(
                    f"that status write changed metadata.generation from {generation} to "
                    f"{answer['metadata'].get('generation')}"
                )
            _restore(cluster, ref, "status", status, before, None)

    if not report.served:
        violations.insert(
            0,
            f"the API server does not serve {info.plural}/status (discovery lists "
            f"subresources: {sorted(info.subresources) or 'none'})",
        )
        if schema is not None and not schema.get("status_subresource"):
            violations.append(
                "the CustomResourceDefinition declares no subresources.status for "
                f"{ref.api_version}: add `subresources: {{status: {{}}}}` to that version"
            )
    else:
        if status is None:
            report.skipped.append(f"status written through /status: {no_status_field}")
        else:
            answer = _probe_write(cluster, ref, {"status": status}, "status", name)
            if diff(answer.get("status") or {}, status):
                raise ClusterError(
                    f"cannot probe the status subresource of {name}: a write of status {status!r} "
                    "through /status was not stored (pruned by the schema, or rewritten by a webhook); "
                    "pass status_probe= with a field the schema keeps"
                )
            report.checked.append("a status write through /status leaves metadata.generation unchanged")
            if answer["metadata"].get("generation") != generation:
                violations.append(
                    f"a status write through /status changed metadata.generation from "
                    f"{generation} to {answer['metadata'].get('generation')}"
                )
            _restore(cluster, ref, "status", status, before, "status")
        if spec is None:
            report.skipped.append("spec written through /status: no spec field to probe (pass spec_probe=)")
        else:
            answer = _probe_write(cluster, ref, {"spec": spec}, "status", name)
            report.checked.append("spec written through /status is ignored")
            if not diff(answer.get("spec") or {}, spec):
                violations.append(f"a merge patch of spec {spec!r} through /status was stored")
                _restore(cluster, ref, "spec", spec, before, None)
    if violations:
        raise AssertionError(
            failure(f"{name} has no working status subresource", RULE_SUBRESOURCE, violations)
        )
    return report


def _probe_write(
    cluster: Cluster, ref: ObjectRef, patch: dict[str, Any], subresource: str | None, name: str
) -> dict[str, Any]:
    try:
        return cluster.patch(ref, patch, subresource=subresource)
    except ApiError as error:
        if error.status == 404 and subresource:
            return cluster.get(ref)  # not served: reported by the caller
        raise ClusterError(
            f"cannot probe the status subresource of {name}: the probe write {patch!r}"
            f"{' to /' + subresource if subresource else ''} was rejected ({error.status}: "
            f"{error.message}); pass status_probe=/spec_probe= with values the schema accepts"
        ) from None


def _restore(
    cluster: Cluster,
    ref: ObjectRef,
    section: str,
    probe: Probe,
    before: Mapping[str, Any],
    subresource: str | None,
) -> None:
    """Put back the values the probe overwrote (``null`` removes fields that were absent)."""
    original = before.get(section)
    restore = _restore_patch(probe, original) if isinstance(original, Mapping) else None
    cluster.patch(ref, {section: restore}, subresource=subresource)


def _restore_patch(probe: Mapping[str, Any], original: Any) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for key, value in probe.items():
        old = original.get(key) if isinstance(original, Mapping) else None
        if isinstance(value, Mapping) and isinstance(old, Mapping):
            patch[key] = _restore_patch(value, old)
        else:
            patch[key] = copy.deepcopy(old)
    return patch


def _crd_schema(cluster: Cluster, ref: ObjectRef) -> dict[str, Any] | None:
    """The version's openAPIV3Schema (plus ``status_subresource``) from its CRD, if it is a CRD."""
    crd = crd_of(cluster, ref)
    if crd is None:
        return None
    version = ref.api_version.rpartition("/")[2]
    for entry in crd["spec"].get("versions") or []:
        if entry.get("name") == version:
            schema = dict((entry.get("schema") or {}).get("openAPIV3Schema") or {})
            schema["status_subresource"] = "status" in (entry.get("subresources") or {})
            return schema
    return None


def _derived_probe(schema: Mapping[str, Any] | None, section: str, current: Any) -> dict[str, Any] | None:
    """A merge-patch fragment for ``section`` that changes it to another value its schema accepts.

    Every valid shape is covered: scalar fields (enums, patterns, date-times too), nested
    objects, maps (``additionalProperties``), lists (an item is appended, e.g. a condition when
    ``status`` holds only ``conditions``) and ``x-kubernetes-preserve-unknown-fields``. None
    when nothing can be written (no schema, or a section the schema prunes entirely).
    """
    if schema is None:
        return None
    sub = (schema.get("properties") or {}).get(section)
    if not isinstance(sub, Mapping):
        return None
    probe = _changed_object(sub, current, 0) if isinstance(current, Mapping) else _fresh_value(sub, 0)
    return probe if isinstance(probe, dict) else None


def _keeps_nothing(schema: Mapping[str, Any] | None, section: str) -> bool:
    """Whether the schema prunes every field of ``section`` (``{type: object}`` and nothing more)."""
    if schema is None:
        return False
    sub = (schema.get("properties") or {}).get(section)
    if sub is None:
        return not schema.get("x-kubernetes-preserve-unknown-fields")
    return (
        isinstance(sub, Mapping)
        and not sub.get("properties")
        and not sub.get("additionalProperties")
        and not sub.get("x-kubernetes-preserve-unknown-fields")
    )


_NO_VALUE = object()
_MAX_DEPTH = 4
_PROBE_TIME = "2001-02-03T04:05:06Z"


def _changed_object(schema: Mapping[str, Any], current: Mapping[str, Any], depth: int) -> Any:
    """A merge patch changing one field of the existing object ``current`` (scalars first)."""
    if schema.get("x-kubernetes-validations") or depth > _MAX_DEPTH:
        return _NO_VALUE
    properties = schema.get("properties") or {}
    for key, sub in properties.items():
        if _is_scalar(sub):
            value = _new_scalar(sub, current.get(key))
            if value is not _NO_VALUE:
                return {key: value}
    for key, sub in properties.items():
        if _is_scalar(sub) or sub.get("x-kubernetes-validations"):
            continue
        value = _changed_value(sub, current.get(key), depth + 1)
        if value is not _NO_VALUE:
            return {key: value}
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        value = _fresh_value(extra, depth + 1)
        key = f"ktest-probe-{secrets.token_hex(3)}"
        if value is not _NO_VALUE:
            return {key: value}
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return {"ktestProbe": f"probe-{secrets.token_hex(4)}"}
    return _NO_VALUE


def _changed_value(schema: Mapping[str, Any], current: Any, depth: int) -> Any:
    """A new value for a field whose current value is ``current`` (absent: None)."""
    if _is_scalar(schema):
        return _new_scalar(schema, current)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if isinstance(current, Mapping):
            return _changed_object(schema, current, depth)
        return _fresh_value(schema, depth)
    if kind == "array":
        return _longer_list(schema, current, depth)
    return _NO_VALUE


def _longer_list(schema: Mapping[str, Any], current: Any, depth: int) -> Any:
    """``current`` with one new valid item appended (a merge patch replaces the whole list)."""
    items = list(current) if isinstance(current, list) else []
    item_schema = schema.get("items")
    if not isinstance(item_schema, Mapping) or schema.get("x-kubernetes-validations"):
        return _NO_VALUE
    limit = schema.get("maxItems")
    if limit is not None and len(items) >= limit:
        if limit < 1:
            return _NO_VALUE
        items = items[: limit - 1]
    item = _fresh_value(item_schema, depth + 1)
    if item is _NO_VALUE or item in items:
        return _NO_VALUE
    return [*items, item]


def _fresh_value(schema: Mapping[str, Any], depth: int) -> Any:
    """A valid value for a field that does not exist yet (objects get their required fields)."""
    if depth > _MAX_DEPTH or schema.get("x-kubernetes-validations"):
        return _NO_VALUE
    if _is_scalar(schema):
        return _new_scalar(schema, None)
    kind = schema.get("type")
    if kind == "array":
        minimum = schema.get("minItems") or 0
        value = _longer_list(schema, [], depth)
        return value if value is not _NO_VALUE and minimum <= 1 else _NO_VALUE
    if kind != "object" and "properties" not in schema:
        return _NO_VALUE
    properties = schema.get("properties") or {}
    obj: dict[str, Any] = {}
    for key in schema.get("required") or []:
        sub = properties.get(key)
        value = _fresh_value(sub, depth + 1) if isinstance(sub, Mapping) else _NO_VALUE
        if value is _NO_VALUE:
            return _NO_VALUE
        obj[key] = value
    if obj:
        return obj
    return _changed_object(schema, {}, depth)


def _is_scalar(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") in ("string", "boolean", "integer", "number") or bool(
        schema.get("x-kubernetes-int-or-string")
    )


def _new_scalar(schema: Mapping[str, Any], current: Any) -> Any:
    """A value of a scalar field that differs from ``current`` and passes its schema."""
    if schema.get("x-kubernetes-validations"):
        return _NO_VALUE
    enum = schema.get("enum")
    if enum is not None:
        return next((value for value in enum if value != current), _NO_VALUE)
    kind = schema.get("type")
    if kind == "string":
        return _new_string(schema, current)
    if kind == "boolean":
        return not bool(current)
    if kind in ("integer", "number") or schema.get("x-kubernetes-int-or-string"):
        if schema.get("exclusiveMinimum") or schema.get("exclusiveMaximum") or schema.get("multipleOf"):
            return _NO_VALUE
        low, high = schema.get("minimum"), schema.get("maximum")
        base = current if isinstance(current, (int, float)) and not isinstance(current, bool) else 0
        for candidate in (base + 7, base - 7, low, high):
            if candidate is None or candidate == current:
                continue
            if (low is None or candidate >= low) and (high is None or candidate <= high):
                return candidate if kind == "number" else int(candidate)
    return _NO_VALUE


def _new_string(schema: Mapping[str, Any], current: Any) -> Any:
    token = secrets.token_hex(3)
    fmt = schema.get("format")
    if fmt == "date-time":
        candidates = [_PROBE_TIME, "2002-03-04T05:06:07Z"]
    elif not fmt:
        candidates = [
            f"ktest-probe-{token}",
            f"KtestProbe{token}",
            f"ktestprobe{token}",
            "KtestProbe",
            "ktest-probe",
            "ktestprobe",
            "probe",
            "p",
            "P",
            "0",
            "1",
        ]
    else:
        return _NO_VALUE  # other formats (int-or-string, uuid, byte, ...): not guessed
    low, high = schema.get("minLength") or 0, schema.get("maxLength")
    pattern = schema.get("pattern")
    for candidate in candidates:
        if candidate == current or len(candidate) < low or (high is not None and len(candidate) > high):
            continue
        try:
            if pattern and not re.search(pattern, candidate):
                continue
        except re.error:
            return _NO_VALUE  # a pattern Python cannot read: do not guess
        return candidate
    return _NO_VALUE


# --------------------------------------------------------------- observedGeneration


def assert_observed_generation(
    cluster: Cluster, obj: RefLike, *, timeout: float | None = None, path: str = "status.observedGeneration"
) -> dict[str, Any]:
    """Eventually ``status.observedGeneration`` (or ``path``) equals ``metadata.generation``.

    Returns the object.
    """
    __tracebackhide__ = True
    ref = as_ref(obj)
    wait = timeout_or_default(timeout)

    def observed(current: dict[str, Any]) -> dict[str, Any]:
        generation = current["metadata"].get("generation")
        reported = get_field(current, path)
        if reported != generation:
            raise AssertionError(f"{path} is {reported!r} but metadata.generation is {generation!r}")
        return current

    def explain(report: str, seen: dict[str, Any] | None) -> str:
        lines = [report]
        if seen is not None:
            lines = [*status_write_notes(seen), report]
        headline = f"{describe(ref, uid_of(seen))}: {path} never caught up with metadata.generation"
        return failure(f"{headline} within {wait:g}s", RULE_OBSERVED, lines)

    return until_read(
        cluster,
        ref,
        observed,
        timeout=wait,
        description=f"{ref} {path} == metadata.generation",
        explain=explain,
    )
