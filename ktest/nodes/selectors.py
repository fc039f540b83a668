"""Label selectors ("app=web,tier!=db,env in (a,b),!legacy") as KWOK Stage selectors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ktest.errors import KtestError
from ktest.nodes.stages import expression

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EQUALITY = re.compile(rf"^\s*({_KEY})\s*(==|=|!=)\s*({_VALUE})\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


class SimulationError(KtestError):
    """A behaviour ktest cannot simulate here, or one that selected nothing."""


class SelectorError(SimulationError):
    """A label selector ktest cannot read."""


def _requirements(text: str) -> list[str]:
    """Split at the commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def label_key(key: str) -> str:
    return f'.metadata.labels["{key}"]'


def selector_expressions(selector: str | Mapping[str, str] | None) -> list[dict[str, Any]]:
    """``matchExpressions`` for ``selector``: a mapping (equality), a selector string, or None/""
    (every Pod); SelectorError naming the requirement that cannot be read."""
    if selector is None:
        return []
    if isinstance(selector, Mapping):
        return [expression(label_key(str(k)), "In", str(v)) for k, v in selector.items()]
    if not isinstance(selector, str):
        raise SelectorError(f"a label selector is a string or a mapping, not {type(selector).__name__}")
    if not selector.strip():
        return []
    found = []
    for requirement in _requirements(selector):
        if match := _SET.match(requirement):
            values = [value.strip() for value in match.group(4).split(",") if value.strip()]
            if not values:
                raise SelectorError(f"label selector {selector!r}: {requirement.strip()!r} lists no values")
            found.append(
                expression(label_key(match.group(1)), "In" if match.group(3) == "in" else "NotIn", *values)
            )
        elif match := _EQUALITY.match(requirement):
            operator = "NotIn" if match.group(3) == "!=" else "In"
            found.append(expression(label_key(match.group(1)), operator, match.group(4)))
        elif match := _EXISTS.match(requirement):
            found.append(
                expression(label_key(match.group(2)), "DoesNotExist" if match.group(1) else "Exists")
            )
        else:
            raise SelectorError(
                f"label selector {selector!r}: cannot read {requirement.strip()!r}. Write requirements "
                "like app=web, tier!=db, env in (a,b), env notin (c), legacy or !legacy, separated by commas."
            )
    return found


def kubernetes_selector(selector: str | Mapping[str, str] | None) -> str:
    """The same selector as the API's ``labelSelector`` query parameter."""
    if selector is None:
        return ""
    if isinstance(selector, Mapping):
        return ",".join(f"{k}={v}" for k, v in selector.items())
    return selector
