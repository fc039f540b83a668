"""Failure messages of ``eventually``/``consistently``: what was checked, for how long,
how often, how it failed last, and the last value seen."""

from __future__ import annotations

import pprint
import reprlib
import textwrap
import traceback
import types
from collections.abc import Callable
from typing import Any

from ktest.wait.checks import lambda_source

MAX_VALUE_CHARS = 2000
MAX_VALUE_LINES = 40
MAX_LOCALS = 12


def describe_callable(fn: Callable[..., Any]) -> str:
    """A short name for a check: its function name, or the source of a lambda."""
    name = getattr(fn, "__name__", None)
    if name == "<lambda>":
        text = " ".join((lambda_source(fn) or name).split())
        return text if len(text) <= 80 else text[:77] + "..."
    return name or repr(fn)


def format_value(value: Any) -> str:
    """``pprint`` of a value, cut to a readable size."""
    text = pprint.pformat(value, width=100, compact=True, sort_dicts=False)
    lines = text.splitlines()
    if len(lines) > MAX_VALUE_LINES:
        text = "\n".join(lines[:MAX_VALUE_LINES]) + f"\n... ({len(lines) - MAX_VALUE_LINES} more lines)"
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + f"... ({len(text) - MAX_VALUE_CHARS} more characters)"
    return text


def short_value(value: Any, *, limit: int = 200) -> str:
    """``repr`` of a value on one line, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shortening_repr(*, chars: int, items: int, depth: int) -> Callable[[Any], str]:
    """A ``repr`` for messages: strings and other values cut to ``chars`` characters, dicts
    and lists to ``items`` entries, nesting to ``depth`` levels."""
    shortened = reprlib.Repr()
    shortened.maxstring = shortened.maxother = chars
    shortened.maxdict = shortened.maxlist = items
    shortened.maxlevel = depth
    return shortened.repr


def block(title: str, text: str) -> str:
    """``title`` followed by ``text`` on the same line, or indented below if multi-line."""
    if "\n" not in text and len(title) + len(text) < 100:
        return f"{title} {text}"
    return f"{title}\n{textwrap.indent(text, '    ')}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def seen_locals(error: BaseException, fn: Callable[..., Any]) -> dict[str, Any]:
    """The variables of the check's own frame when it raised ``error``: the values it
    saw (objects it fetched, closure variables), minus functions, classes and modules."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return {}
    for frame, _ in traceback.walk_tb(error.__traceback__):
        if frame.f_code is code:
            return {
                name: value
                for name, value in frame.f_locals.items()
                if name.isidentifier() and not name.startswith("_") and not is_code_like(value)
            }
    return {}


def format_locals(values: dict[str, Any]) -> str:
    """``name = value`` lines, long values indented below their name."""
    lines = []
    for name, value in list(values.items())[:MAX_LOCALS]:
        text = format_value(value)
        if "\n" in text:
            lines.append(f"{name} =\n{textwrap.indent(text, '    ')}")
        else:
            lines.append(f"{name} = {text}")
    if len(values) > MAX_LOCALS:
        lines.append(f"... ({len(values) - MAX_LOCALS} more)")
    return "\n".join(lines)


def is_code_like(value: Any) -> bool:
    """Functions, classes and modules: names in an expression, not values worth showing."""
    return isinstance(
        value, (types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.ModuleType, type)
    )
