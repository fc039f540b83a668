"""Package attributes imported on first use (PEP 562), so ``import ktest`` stays cheap.

A package lists what it exports and where each name lives; the module holding it
is imported only when the name is first read. Type checkers do not run ``__getattr__``:
the package also imports each name under ``if TYPE_CHECKING:`` (``from module import
name as name``) and defines ``__getattr__`` under ``if not TYPE_CHECKING:``, so that
mypy, pyright and IDEs see every name's real type and a misspelt one is an error, not
``Any`` (``tests/test_public_api.py`` keeps the two lists equal).
"""

from __future__ import annotations

import importlib
import warnings
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


def moved_attributes(package: str, namespace: Mapping[str, Any]) -> Callable[[str], Any]:
    """``__getattr__`` for a module some public names left (``ktest.public_api.MOVED``): the
    name still resolves, from its new module, with a ``DeprecationWarning`` naming it."""
    from ktest.public_api import MOVED

    moved = MOVED.get(package, {})

    def __getattr__(name: str) -> Any:
        new_module = moved.get(name)
        if new_module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(
            f"{package}.{name} moved to {new_module}.{name}; import it from there "
            f"(the old place goes away in a later release, see CHANGELOG.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_module), name)

    return __getattr__
