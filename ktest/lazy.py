"""Package attributes imported on first use (PEP 562), so ``import ktest`` stays cheap.

A package lists what it exports and where each name lives; the module holding it
is imported only when the name is first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_attributes(
    package: str,
    exports: Mapping[str, str],
    namespace: Mapping[str, Any],
    submodules: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps a name to the module
    defining it; ``submodules`` are names of the package's own modules, imported on access."""
    modules = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports, *modules})

    return __getattr__, __dir__
