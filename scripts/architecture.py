#!/usr/bin/env python3
"""Draw ktest's house: rooms (a package under ktest/, a top-level module, or a sub-package named in
SUB_ROOMS), the import arrows
between them (read from the source, so imports inside functions and under TYPE_CHECKING count),
import circles, and the arrows that run up from a lower floor to a higher one.

Floors are declared in FLOORS, lowest first: a room may import rooms on its own floor's lower
floors only. The same holds file by file: every module's imports (resolved to the module they
name) form no circle either, and none runs up a floor; within a room, a file's storey is how
many of the room's files stand below it (0: it imports none of them). `python
scripts/architecture.py` prints the drawing; tests/test_architecture.py keeps it at 0 circles
and 0 upward arrows, for rooms and for files.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

KTEST = Path(__file__).resolve().parents[1] / "ktest"

FLOORS: list[list[str]] = [
    ["public_api", "lazy", "errors", "controller_names", "backend_registry", "addon_registry", "api_error",
     "context"],
    ["base"],
    ["run_context", "assets"],
    ["controlplane", "cluster"],
    ["wait"],
    ["proxy", "faults"],
    ["operators"],
    ["assertions"],
    ["config", "config_values"],
    ["sessions", "extension"],
    ["backends"],
    ["plugin", "cli"],
    # The add-on wing: above the whole core, which reaches it by name only (ktest/addon_registry.py).
    ["webhooks", "nodes", "crd_versions", "backends.kind", "kind"],
    ["timeline", "plane_upgrade", "operator_upgrade", "rbac_audit", "replicas"],
    ["__init__", "__main__"],
]
"""Lowest first. A room's imports must all point at its floor or below (its floor: no circles)."""

ADD_ON_WING: dict[str, str] = {
    "timeline": "failure timelines",
    "webhooks": "admission and conversion webhooks",
    "plane_upgrade": "the control plane's in-place upgrade",
    "crd_versions": "CRD version evolution and storage",
    "nodes": "simulated nodes",
    "replicas": "operator replicas and leader election",
    "operator_upgrade": "an operator's own upgrade",
    "rbac_audit": "RBAC derived from the session's requests",
    "backends.kind": "the kind backend, a plug-in registered through ktest.extension",
    "kind": "0.1.0's places of the kind backend's public names",
}
"""The add-on wing: packages of features on top of the core. The core (every other module) never
imports them; it reaches their parts by name through ``ktest/addon_registry.py``."""

COUNTED_APART = ("nodes", "replicas", "operator_upgrade", "rbac_audit")
"""Add-ons of issues 45 and 46 (simulated nodes, production shape), whose lines are reported apart."""

SEAMS: frozenset[str] = frozenset({
    "assertions.changes", "assertions.objects", "assertions.quiescence", "assertions.traffic",
    "assets", "assets.bundle", "assets.gotool", "assets.minors", "assets.probe", "assets.progress",
    "assets.selectors", "assets.sources", "assets.store", "assets.versions",
    "backend_registry", "backends.state",
    "base.bounded", "base.certs", "base.closing", "base.connection_cap", "base.holders", "base.janitor",
    "base.janitor_client", "base.ports", "base.process", "base.procfs",
    "cluster", "cluster.client", "cluster.cluster", "cluster.crds", "cluster.manifests", "cluster.refs",
    "cluster.rest",
    "config", "config_values",
    "controlplane", "controlplane.apiserver", "controlplane.binaries", "controlplane.controller_manager",
    "controlplane.plane", "controlplane.upgrade_report",
    "errors", "errors.api",
    "extension",
    "lazy",
    "operators", "operators.inprocess", "operators.kopf.runner", "operators.logs", "operators.operator",
    "operators.process_runner", "operators.rbac",
    "plugin.artifacts", "plugin.session",
    "proxy", "proxy.api_request", "proxy.operator_proxy", "proxy.traffic",
    "run_context",
    "sessions.attached", "sessions.backend", "sessions.users",
    "wait", "wait.match", "wait.report", "wait.run",
})
"""The core modules (``ktest.`` left off) the add-on wing may import: its declared seams. An add-on
that needs another part of the core adds it here, in the same change, so that what the wing stands
on is one list (tests/test_architecture.py keeps the wing's imports within it)."""

FRONT = ("ktest", "ktest.assertions", "ktest.assertions.aio", "ktest.cluster")
"""Core modules that re-export public names of both tiers: lazily at run time (by name, from
``ktest/public_api.py``), and under ``if TYPE_CHECKING:`` for type checkers. Those typing-only
imports are the one kind of core -> add-on arrow allowed."""


SUB_ROOMS = ("backends.kind",)
"""Sub-packages that are rooms of their own: the built-in backends are plug-ins in ``backends/``,
and kind's belongs to the add-on wing while the rest of ``backends`` is core."""


def room_of(module: str) -> str | None:
    """``ktest.cluster.rest`` -> ``cluster``; ``ktest.backends.kind.recipe`` -> ``backends.kind``
    (SUB_ROOMS); ``ktest`` -> ``__init__``; outside ktest -> None."""
    if module == "ktest":
        return "__init__"
    if not module.startswith("ktest."):
        return None
    inside = module.removeprefix("ktest.")
    for room in SUB_ROOMS:
        if inside == room or inside.startswith(f"{room}."):
            return room
    return inside.split(".")[0]


def module_name(path: Path, root: Path = KTEST) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _typing_only_nodes(tree: ast.AST) -> set[int]:
    """The ids of the nodes written under ``if TYPE_CHECKING:`` (its body, not its ``else``)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test).split("."):
            found.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return found


def import_statements(
    path: Path, root: Path = KTEST, *, run_time_only: bool = False
) -> list[tuple[str, list[str] | None]]:
    """Every import in ``path``, wherever written: ``(module, None)`` for ``import module``,
    ``(module, [names])`` for ``from module import names`` (relative modules made absolute).
    ``run_time_only`` leaves out the imports under ``if TYPE_CHECKING:``."""
    found: list[tuple[str, list[str] | None]] = []
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    skipped = _typing_only_nodes(tree) if run_time_only else set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((base, [alias.name for alias in node.names]))
    return found


def imports_of(path: Path) -> set[str]:
    """The modules and names ``path`` imports, but a front module's typing-only re-exports of the
    add-on wing (see FRONT: they are names, not arrows, at run time)."""
    found: set[str] = set()
    statements = import_statements(path)
    if module_name(path) in FRONT:
        run_time = import_statements(path, run_time_only=True)
        statements = [(base, names) for base, names in statements
                      if (base, names) in run_time or room_of(base) not in ADD_ON_WING]
    for base, names in statements:
        if names is None:
            found.add(base)
            continue
        if base != "ktest":  # from ktest import run_context: the arrow goes to ktest.run_context only
            found.add(base)
        found.update(f"{base}.{name}" for name in names)
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
    folder = KTEST.joinpath(*room.split("."))
    return folder.is_dir() or folder.with_suffix(".py").exists() or room == "__init__"


def rooms(root: Path = KTEST) -> list[str]:
    found = [p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    found += [p.stem for p in root.glob("*.py")]
    found += [room for room in SUB_ROOMS if (root.joinpath(*room.split(".")) / "__init__.py").exists()]
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


def modules(root: Path = KTEST) -> dict[str, Path]:
    """Every module of ktest by its dotted name (a package by its ``__init__.py``)."""
    return {module_name(path, root): path for path in sorted(root.rglob("*.py"))}


def _module_named(name: str, known: Mapping[str, Path]) -> str | None:
    """The module ``name`` is or lies in (``ktest.proxy.faults.Decision`` -> ``ktest.proxy.faults``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def file_arrows(root: Path = KTEST, *, run_time_only: bool = False) -> set[tuple[str, str]]:
    """(from module, to module) for every import of a ktest module, wherever it is written.

    ``from ktest.proxy import endpoints`` points at the module ``ktest.proxy.endpoints``,
    ``from ktest.proxy import Traffic`` at the package ``ktest.proxy`` (its ``__init__``); the
    parent packages Python runs first on the way are not arrows of the importing file.
    """
    known = modules(root)
    drawn: set[tuple[str, str]] = set()
    for source, path in known.items():
        for base, names in import_statements(path, root, run_time_only=run_time_only):
            targets = [_module_named(base, known)] if names is None else [
                f"{base}.{name}" if f"{base}.{name}" in known else _module_named(base, known)
                for name in names
            ]
            drawn.update((source, target) for target in targets if target is not None and target != source)
    return drawn


def floor_arrows(root: Path = KTEST) -> set[tuple[str, str]]:
    """The file arrows the floors judge: all of them but the front's typing-only re-exports of the
    add-on wing (FRONT), which type checkers follow and run time reaches by name."""
    reexports = set(fence_crossings(root)["typing, front"])
    return file_arrows(root) - reexports


def room_of_module(module: str) -> str:
    return room_of(module) or "__init__"


def tier_of(module: str) -> str:
    """``add-on`` for a module of the add-on wing, else ``core``."""
    return "add-on" if room_of_module(module) in ADD_ON_WING else "core"


def fence_crossings(root: Path = KTEST) -> dict[str, list[tuple[str, str]]]:
    """Core -> add-on file arrows: ``"run time"`` (anywhere but under ``if TYPE_CHECKING:``),
    ``"typing, front"`` (typing-only, from a module of FRONT: allowed) and ``"typing"`` (the rest)."""
    run_time = file_arrows(root, run_time_only=True)
    crossings: dict[str, list[tuple[str, str]]] = {"run time": [], "typing, front": [], "typing": []}
    for a, b in sorted(file_arrows(root)):
        if tier_of(a) == "core" and tier_of(b) == "add-on":
            kind = "run time" if (a, b) in run_time else "typing, front" if a in FRONT else "typing"
            crossings[kind].append((a, b))
    return crossings


def undeclared_seams(root: Path = KTEST) -> list[tuple[str, str]]:
    """Add-on -> core file arrows to a core module not in SEAMS."""
    return sorted(
        (a, b) for a, b in file_arrows(root)
        if tier_of(a) == "add-on" and tier_of(b) == "core" and b.removeprefix("ktest.") not in SEAMS
    )


def raw_lines(path: Path) -> int:
    """Every line of the file, blank lines, comments and docstrings included."""
    return len(path.read_text().splitlines())


def lines_per_tier(root: Path = KTEST) -> dict[str, int]:
    """Raw lines of ``core``, ``add-on wing`` and, within the wing, ``counted apart``
    (COUNTED_APART) and each add-on room."""
    found: dict[str, int] = {"core": 0, "add-on wing": 0, "counted apart": 0}
    for module, path in modules(root).items():
        room = room_of_module(module)
        lines = raw_lines(path)
        if room not in ADD_ON_WING:
            found["core"] += lines
            continue
        found["add-on wing"] += lines
        found[room] = found.get(room, 0) + lines
        if room in COUNTED_APART:
            found["counted apart"] += lines
    return found


def upward_files(drawn: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """File arrows from a module to one in a room on a higher floor."""
    return sorted(
        (a, b) for a, b in drawn if floor_of(room_of_module(b)) > floor_of(room_of_module(a))
    )


def storeys(drawn: Iterable[tuple[str, str]], root: Path = KTEST) -> dict[str, int]:
    """Each module's storey within its room: 0 if it imports none of the room's modules, else one
    above the highest it imports. Modules in a circle, or standing on one, have no storey."""
    drawn = list(drawn)
    below: dict[str, set[str]] = {module: set() for module in modules(root)}
    for a, b in drawn:
        if room_of_module(a) == room_of_module(b):
            below[a].add(b)
    found: dict[str, int | None] = {module: None for group in circles(drawn) for module in group}

    def storey(module: str) -> int | None:
        if module not in found:
            lower = [storey(each) for each in below[module]]
            known = [level for level in lower if level is not None]
            found[module] = None if len(known) < len(lower) else 1 + max(known, default=-1)
        return found[module]

    return {module: level for module in below if (level := storey(module)) is not None}


def _short(module: str) -> str:
    """The name within its room: ``ktest.proxy.http2`` -> ``http2``, the room's package -> ``__init__``."""
    room = room_of_module(module)
    prefix = f"ktest.{room}."
    return module[len(prefix):] if module.startswith(prefix) else "__init__"


def _named(node: ast.AST, names: frozenset[str]) -> str | None:
    """The backend name ``node`` is, as a string constant (``"kind"``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return node.value
    return None


def _table_names(node: ast.AST, names: frozenset[str]) -> list[str]:
    """The backend names of a string table: a tuple, list or set literal (or a dict literal's keys)
    whose strings are all backend names. ``("apiVersion", "kind")`` is a Kubernetes object's
    fields, not a table of backends; ``("bare", "kind")`` is one."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        members: list[ast.expr | None] = list(node.elts)
    elif isinstance(node, ast.Dict):
        members = list(node.keys)
    else:
        return []
    strings = [m for m in members if isinstance(m, ast.Constant) and isinstance(m.value, str)]
    named = [found for member in strings if (found := _named(member, names))]
    return named if strings and len(named) == len(strings) else []


def backend_names_outside(names: Iterable[str], root: Path = KTEST) -> list[str]:
    """Where a module names a backend outside that backend's package (``ktest/backends/<name>/``)
    and the registry: compared by ``==``, ``!=``, ``in``/``not in`` or ``match``, or held in a string
    table (a tuple, list, set or dict literal). A backend's differences belong to its spec's parts."""
    wanted = frozenset(names)
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts == ("backend_registry.py",):
            continue
        home = relative.parts[1] if relative.parts[0] == "backends" and len(relative.parts) > 2 else None
        allowed = wanted & {home} if home else frozenset()
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse(path.read_text())):
            named: list[str] = []
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
                    if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                        named += [n for side in (left, right) if (n := _named(side, wanted))]
            elif isinstance(node, ast.MatchValue):
                named += [n for n in [_named(node.value, wanted)] if n]
            named += _table_names(node, wanted)
            for name in sorted(set(named) - allowed):
                line = getattr(node, "lineno", 0)
                found.append(f"{relative}:{line}: {name!r} in {lines[line - 1].strip() if line else '?'}")
    return sorted(set(found))


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
    files = floor_arrows()
    print(f"files: {len(modules())} modules, {len(files)} import arrows; storeys in rooms, lowest first:")
    levels = storeys(files)
    for room in all_rooms:
        members = sorted((level, _short(m)) for m, level in levels.items() if room_of_module(m) == room)
        if len(members) > 1:
            by_storey = [
                " ".join(name for level, name in members if level == storey)
                for storey in range(members[-1][0] + 1)
            ]
            print(f"  {room}: {' | '.join(by_storey)}")
    up_files = upward_files(files)
    print(f"{len(up_files)} file arrows run up:")
    for a, b in up_files:
        print(f"  {a} -> {b}")
    file_circles = circles(files)
    print(f"{len(file_circles)} file import circles:")
    for group in file_circles:
        print("  " + " <-> ".join(group))
    crossings = fence_crossings()
    print(f"the fence: {len(crossings['run time']) + len(crossings['typing'])} core -> add-on arrows "
          f"({len(crossings['typing, front'])} typing-only re-exports of the front allowed):")
    for kind in ("run time", "typing"):
        for a, b in crossings[kind]:
            print(f"  {a} -> {b}  ({kind})")
    undeclared = undeclared_seams()
    print(f"the wing stands on {len(SEAMS)} declared seams of the core; {len(undeclared)} imports of others:")
    for a, b in undeclared:
        print(f"  {a} -> {b}")
    tiers = lines_per_tier()
    rest = tiers["add-on wing"] - tiers["counted apart"]
    print(f"raw lines: core {tiers['core']}, add-on wing {tiers['add-on wing']} "
          f"({rest} + {tiers['counted apart']} of {', '.join(COUNTED_APART)}), "
          f"total {tiers['core'] + tiers['add-on wing']}")
    for room in ADD_ON_WING:
        print(f"  {room}: {tiers.get(room, 0)} ({ADD_ON_WING[room]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
