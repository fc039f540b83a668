"""Partial matching: does an object contain the expected fields?

``expected`` is a subset of the object (a dict, or YAML text).  Mappings match when
every expected key matches (extra keys in the object are fine); a ``null`` expected
value matches a missing or null field.  Lists match item by item in order and must
have the same length, unless ``list_keys`` names a key field for them: then each
expected item is found by its key regardless of order, and other items are ignored
(the way to check one condition among several).  Numbers compare by value
(``1 == 1.0``) but ``True`` is not ``1``.

Differences are reported one per line with a field path, for example
``status.conditions[type=Ready].status: expected 'True', got 'False'``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from ktest.errors import ManifestError
from ktest.wait.report import plural, shortening_repr

ListKeys = Mapping[str, str] | Callable[[str], "str | None"]
"""How to match list items by key: ``{"conditions": "type", "containers": "name"}``
(a key is a field name, or a dotted path without indexes such as
``"spec.template.spec.containers"``), or a function from that dotted path to the
key field name (or None for in-order matching)."""

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_MISSING = object()
_short = shortening_repr(chars=120, items=6, depth=3)


def diff(actual: Any, expected: Any, *, list_keys: ListKeys | None = None) -> list[str]:
    """The differences between ``actual`` and the ``expected`` subset, one line each;
    empty when it matches.  ``expected`` may be YAML text."""
    if isinstance(expected, str):
        expected = _load_expected(expected)
    differences = _Differences(list_keys)
    differences.compare(_plain(actual), expected, "", "")
    return differences.lines


def assert_matches(actual: Any, expected: Any, *, list_keys: ListKeys | None = None) -> bool:
    """Raise ``AssertionError`` listing every field of ``expected`` that ``actual`` does
    not match.  ``expected`` is a dict or YAML text; ``actual`` an object dict (or a
    client object with ``to_dict()``).  Returns True, so that it can be a whole check:
    ``eventually(lambda: assert_matches(cluster.get(ref), {...}))``."""
    plain = _plain(actual)
    differences = diff(plain, expected, list_keys=list_keys)
    if differences:
        count = plural(len(differences), "difference")
        lines = [f"{_identity(plain)} does not match the expected fields ({count}):"]
        lines += [f"  {line}" for line in differences]
        raise AssertionError("\n".join(lines))
    return True


class _Differences:
    """The lines of one :func:`diff`; ``path`` is where a value sits (``spec.items[0]``),
    ``generic`` the same without indexes (``spec.items``, what ``list_keys`` names)."""

    def __init__(self, list_keys: ListKeys | None) -> None:
        self.list_keys = list_keys
        self.lines: list[str] = []

    def compare(self, actual: Any, expected: Any, path: str, generic: str) -> None:
        if isinstance(expected, Mapping):
            if not isinstance(actual, Mapping):
                self.lines.append(f"{_where(path)}: expected a mapping, got {_typed(actual)}")
                return
            for key, want in expected.items():
                child = _child(path, key)
                if key not in actual:
                    if want is not None:
                        self.lines.append(f"{child}: missing, expected {_short(want)}{_present(actual)}")
                    continue
                self.compare(actual[key], want, child, f"{generic}.{key}" if generic else str(key))
        elif isinstance(expected, list):
            if not isinstance(actual, list):
                items = plural(len(expected), "item")
                self.lines.append(f"{_where(path)}: expected a list of {items}, got {_typed(actual)}")
                return
            key_field = _key_field(generic, self.list_keys)
            if key_field is None:
                self.compare_in_order(actual, expected, path, generic)
            else:
                self.compare_by_key(actual, expected, key_field, path, generic)
        else:
            self.compare_scalar(actual, expected, path)

    def compare_in_order(self, actual: list[Any], expected: list[Any], path: str, generic: str) -> None:
        if len(actual) != len(expected):
            self.lines.append(f"{_where(path)}: expected {plural(len(expected), 'item')}, got {len(actual)}")
        for index, (have, want) in enumerate(zip(actual, expected, strict=False)):
            self.compare(have, want, f"{path}[{index}]", generic)

    def compare_by_key(
        self, actual: list[Any], expected: list[Any], key_field: str, path: str, generic: str
    ) -> None:
        by_key = {item[key_field]: item for item in actual if isinstance(item, Mapping) and key_field in item}
        for index, want in enumerate(expected):
            if not isinstance(want, Mapping) or key_field not in want:
                raise ManifestError(
                    f"expected item {_where(path)}[{index}] = {_short(want)} has no {key_field!r} "
                    f"field, but list_keys says the items of {generic!r} are matched by "
                    f"{key_field!r}; add {key_field}: ... to the item or drop that list key"
                )
            key = want[key_field]
            label = key if isinstance(key, str) else repr(key)
            item_path = f"{path}[{key_field}={label}]"
            if key not in by_key:
                present = ", ".join(_short(k) for k in by_key) or "none"
                self.lines.append(
                    f"{item_path}: missing, no item has {key_field}={_short(key)} "
                    f"(items have {key_field}: {present})"
                )
                continue
            self.compare(by_key[key], want, item_path, generic)

    def compare_scalar(self, actual: Any, expected: Any, path: str) -> None:
        if expected is None:
            if actual is not None:
                self.lines.append(f"{_where(path)}: expected null, got {_short(actual)}")
        elif not _same_kind(actual, expected):
            self.lines.append(f"{_where(path)}: expected {_typed(expected)}, got {_typed(actual)}")
        elif actual != expected:
            self.lines.append(f"{_where(path)}: expected {_short(expected)}, got {_short(actual)}")


def _same_kind(actual: Any, expected: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool)
    numbers = (int, float)
    if isinstance(expected, numbers):
        return isinstance(actual, numbers)
    return type(actual) is type(expected) or isinstance(actual, type(expected))


def _key_field(generic: str, list_keys: ListKeys | None) -> str | None:
    if list_keys is None:
        return None
    if callable(list_keys):
        return list_keys(generic)
    if generic in list_keys:
        return list_keys[generic]
    return list_keys.get(generic.rsplit(".", 1)[-1])


def _child(path: str, key: Any) -> str:
    if isinstance(key, str) and _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]" if isinstance(key, str) else f"{path}[{key}]"


def _where(path: str) -> str:
    return path or "(object)"


def _typed(value: Any) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {_short(value)}"


def _present(actual: Mapping[Any, Any]) -> str:
    keys = list(actual)
    if not keys:
        return ""
    shown = ", ".join(str(k) for k in keys[:10]) + (", ..." if len(keys) > 10 else "")
    return f" (present: {shown})"


def _plain(obj: Any) -> Any:
    if not isinstance(obj, Mapping) and callable(getattr(obj, "to_dict", None)):
        return obj.to_dict()
    return obj


def _identity(obj: Any) -> str:
    if not isinstance(obj, Mapping):
        return "the object"
    metadata = obj.get("metadata") or {}
    kind = obj.get("kind") or "object"
    name = metadata.get("name")
    if not name:
        return str(kind)
    namespace = metadata.get("namespace")
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _load_expected(text: str) -> Any:
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ManifestError(
            f"the expected fields are not valid YAML{where}: {exc}; fix the YAML text "
            "(indentation with spaces, 'key: value' pairs) or pass a dict"
        ) from exc
    if not isinstance(loaded, Mapping):
        raise ManifestError(
            f"the expected fields must be a YAML mapping (key: value), got "
            f"{type(loaded).__name__} {_short(loaded)}; write them like 'status:\\n  phase: Ready'"
        )
    return loaded
