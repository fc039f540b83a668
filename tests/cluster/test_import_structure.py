"""No import circles between the error types and the cluster layer (read from the source, so that
an import hidden under TYPE_CHECKING or inside a function counts too)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

KTEST = Path(__file__).resolve().parents[2] / "ktest"


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_errors_does_not_reach_back_to_its_api_module() -> None:
    # only the helper that keeps moved names importable (ktest.public_api.MOVED), which imports
    # the new home of a moved name when, and only when, it is asked for
    imported = {m for m in imported_modules(KTEST / "errors" / "__init__.py") if m.startswith("ktest.")}
    assert imported == {"ktest.lazy", "ktest.lazy.moved_attributes"}
    assert "ktest.errors" in imported_modules(KTEST / "errors" / "api.py")  # one direction only


def test_crds_and_namespaces_do_not_reach_back_to_cluster() -> None:
    for name in ("crds.py", "namespaces.py", "client.py"):
        assert "ktest.cluster.cluster" not in imported_modules(KTEST / "cluster" / name), name
    assert "ktest.cluster.crds" in imported_modules(KTEST / "cluster" / "cluster.py")


def test_the_errors_module_loads_without_the_kubernetes_package() -> None:
    code = "import sys, ktest.errors; assert 'kubernetes' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
