#!/usr/bin/env python3
"""Draw ktest's house: rooms (a package under ktest/ or a top-level module), the import arrows
between them (read from the source, so imports inside functions and under TYPE_CHECKING count),
import circles, and the arrows that run up from a lower floor to a higher one.

Floors are declared in FLOORS, lowest first: a room may import rooms on its own floor's lower
floors only. `python scripts/architecture.py` prints the drawing; tests/test_architecture.py
keeps it at 0 circles and 0 upward arrows.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

KTEST = Path(__file__).resolve().parents[1] / "ktest"

FLOORS: list[list[str]] = [
    ["public_api", "lazy", "errors", "controller_names", "backend_registry"],
    ["base"],
    ["api_error", "context", "assets"],
    ["controlplane", "cluster", "kind"],
    ["wait"],
    ["proxy", "faults", "webhooks"],
    ["operators"],
    ["assertions"],
    ["config"],
    ["sessions"],
    ["backends"],
    ["plugin", "cli"],
    ["__init__", "__main__"],
]
"""Lowest first. A room's imports must all point at its floor or below (its floor: no circles)."""


def room_of(module: str) -> str | None:
    """``ktest.cluster.rest`` -> ``cluster``; ``ktest`` -> ``__init__``; outside ktest -> None."""
    if module == "ktest":
        return "__init__"
    if not module.startswith("ktest."):
        return None
    return module.split(".")[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(KTEST.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base != "ktest":  # from ktest import context: the arrow goes to ktest.context only
                found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def arrows(root: Path = KTEST) -> dict[tuple[str, str], list[str]]:
    """(from room, to room) -> the modules whose imports make that arrow."""
    drawn: dict[tuple[str, str], list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        source = module_name(path)
        here = room_of(source) if path.parent != root else path.stem
        if here == "ktest":
            here = "__init__"
        for target in imports_of(path):
            there = room_of(target)
            if there is None or there == here or not _exists(there):
                continue
            drawn.setdefault((str(here), there), []).append(source)
    return drawn


def _exists(room: str) -> bool:
    return (KTEST / room).is_dir() or (KTEST / f"{room}.py").exists() or room == "__init__"


def rooms(root: Path = KTEST) -> list[str]:
    found = [p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    found += [p.stem for p in root.glob("*.py")]
    return sorted(found)


def floor_of(room: str) -> int:
    for level, members in enumerate(FLOORS):
        if room in members:
            return level
    raise KeyError(f"room {room!r} is on no floor: add it to FLOORS in scripts/architecture.py")


def upward(drawn: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, b in drawn if floor_of(b) > floor_of(a))


def circles(drawn: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected groups of more than one room (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in drawn:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def main() -> int:
    drawn = arrows()
    all_rooms = rooms()
    print(f"{len(all_rooms)} rooms on {len(FLOORS)} floors, {len(drawn)} import arrows")
    for level in reversed(range(len(FLOORS))):
        print(f"  floor {level}: {', '.join(FLOORS[level])}")
    up = upward(drawn)
    print(f"{len(up)} arrows run up:")
    for a, b in up:
        print(f"  {a} -> {b}  ({', '.join(sorted(set(drawn[(a, b)])))})")
    found = circles(drawn)
    print(f"{len(found)} import circles:")
    for group in found:
        print("  " + " <-> ".join(group))
    return 0


if __name__ == "__main__":
    sys.exit(main())
