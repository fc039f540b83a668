"""Failure messages of ``eventually``/``consistently``: what was checked, for how long,
how often, how it failed last, and the last value seen."""

from __future__ import annotations

import inspect
import pprint
import textwrap
from collections.abc import Callable
from typing import Any

MAX_VALUE_CHARS = 2000
MAX_VALUE_LINES = 40


def describe_callable(fn: Callable[..., Any]) -> str:
    """A short name for a check: its function name, or the source of a lambda."""
    name = getattr(fn, "__name__", None)
    if name == "<lambda>":
        try:
            source = inspect.getsource(fn).strip()
        except (OSError, TypeError):
            return "<lambda>"
        start = source.find("lambda")
        text = " ".join(source[start:].split()) if start >= 0 else source
        return text if len(text) <= 80 else text[:77] + "..."
    if name:
        return name
    return repr(fn)


def format_value(value: Any) -> str:
    """``pprint`` of a value, cut to a readable size."""
    text = pprint.pformat(value, width=100, compact=True, sort_dicts=False)
    lines = text.splitlines()
    if len(lines) > MAX_VALUE_LINES:
        text = "\n".join(lines[:MAX_VALUE_LINES]) + f"\n... ({len(lines) - MAX_VALUE_LINES} more lines)"
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + f"... ({len(text) - MAX_VALUE_CHARS} more characters)"
    return text


def block(title: str, text: str) -> str:
    """``title`` followed by ``text`` on the same line, or indented below if multi-line."""
    if "\n" not in text and len(title) + len(text) < 100:
        return f"{title} {text}"
    return f"{title}\n{textwrap.indent(text, '    ')}"


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
