"""The operands a check's last expression compared, as lines of a failure message.

Values are shown as pytest shows those of a failing ``assert``: ``where <expression> = <value>``,
then pytest's own explanation of the comparison (the character diff of two strings, the
differing keys of two dicts, ...), through the ``pytest_assertrepr_compare`` hook of the running
test, so plugins and ``-vv`` apply. Outside a pytest test a shorter explanation of ktest's own.
"""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ktest.wait.operands import Part
from ktest.wait.report import format_value, is_code_like, short_value


def describe(expression: Part, values: Mapping[int, Any]) -> list[str]:
    """The lines showing ``expression`` and the values recorded for its parts."""
    return [expression.source, *_details(expression, values)]


def _details(part: Part, values: Mapping[int, Any]) -> list[str]:
    if part.kind == "compare":
        return _compare_details(part, values)
    if part.kind in ("and", "or"):
        lines = []
        for clause in part.children:
            if clause.index not in values:
                lines.append(f"{clause.source}: not evaluated ({part.kind} stopped before it)")
                continue
            lines.append(f"{clause.source}: {short_value(values[clause.index], limit=80)}")
            lines += [textwrap.indent(line, "    ") for line in _details(clause, values)]
        return lines
    if part.kind == "not":
        inner = part.children[0]
        if inner.kind == "value":
            return _where(inner, values)
        return [f"{inner.source}: {short_value(values.get(inner.index), limit=80)}", *_details(inner, values)]
    if part.kind == "call":
        return [line for argument in part.children for line in _where(argument, values)]
    return []


def _compare_details(part: Part, values: Mapping[int, Any]) -> list[str]:
    lines: list[str] = []
    for operand in part.children:
        lines += _where(operand, values)
    for sign, left, right in zip(part.signs, part.children, part.children[1:], strict=False):
        if left.index in values and right.index in values:
            lines += explain(sign, values[left.index], values[right.index])
    return lines


def _where(part: Part, values: Mapping[int, Any]) -> list[str]:
    if part.constant or part.index not in values or is_code_like(values[part.index]):
        return []
    text = format_value(values[part.index])
    if "\n" in text or len(part.source) + len(text) > 100:
        return [f"where {part.source} =", textwrap.indent(text, "    ")]
    return [f"where {part.source} = {text}"]


def explain(sign: str, left: Any, right: Any) -> list[str]:
    """pytest's explanation of ``left <sign> right`` (as under a failing ``assert``), or ktest's
    own when no pytest test is running; nothing when there is nothing to add."""
    from _pytest.assertion import util

    hook = getattr(util, "_reprcompare", None)  # set by pytest while a test runs
    if hook is not None:
        try:
            text = hook(sign, left, right)
        except Exception:  # a faulty __repr__ or plugin: the values above still stand
            text = None
        if not text:
            return []
        config = getattr(util, "_config", None)
        if config is not None and config.getvalue("assertmode") == "rewrite":
            text = text.replace("%%", "%")
        return util.format_explanation(text).splitlines()
    return _own_explanation(sign, left, right)


def _own_explanation(sign: str, left: Any, right: Any) -> list[str]:
    if sign != "==" or left == right:
        return []
    summary = f"{short_value(left, limit=60)} == {short_value(right, limit=60)}"
    if isinstance(left, str) and isinstance(right, str):
        diff = difflib.ndiff(right.splitlines(keepends=True) or [""], left.splitlines(keepends=True) or [""])
        return [summary, "", *(line.rstrip("\n") for line in diff)]
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        differing = [key for key in left if key in right and left[key] != right[key]]
        lines = [summary, ""]
        lines += [f"Differing items: {{{key!r}: {left[key]!r}}} != {{{key!r}: {right[key]!r}}}"
                  for key in differing]
        only_left = [key for key in left if key not in right]
        only_right = [key for key in right if key not in left]
        lines += [f"Left contains more items: {only_left!r}"] if only_left else []
        lines += [f"Right contains more items: {only_right!r}"] if only_right else []
        return lines
    if isinstance(left, Sequence) and isinstance(right, Sequence) and not isinstance(left, (str, bytes)):
        index = next((i for i, (a, b) in enumerate(zip(left, right, strict=False)) if a != b), None)
        if index is not None:
            return [summary, "", f"At index {index} diff: {left[index]!r} != {right[index]!r}"]
        return [summary, "", f"Lengths differ: {len(left)} != {len(right)}"]
    return []
