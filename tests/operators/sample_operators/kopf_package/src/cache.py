"""The sibling module of handlers.py."""

from __future__ import annotations

SOURCE = "package"
_seen: list[str] = []


def remember(name: str) -> int:
    _seen.append(name)
    return len(_seen)
