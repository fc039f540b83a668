"""Load kopf operator modules into a fresh ``kopf.OperatorRegistry`` for one run.

kopf's decorators register into the process-wide default registry at import time, so importing
an operator twice (two tests, a restart) would register its handlers twice. Instead, each run
swaps in a fresh default registry for the import (under a lock) and executes the operator's
handler modules afresh: the named module and every module of its package that holds ``kopf``
are taken out of ``sys.modules`` for the import and put back afterwards. The package's other
modules (exception classes, helpers) stay shared with the test, as ``kopf run`` would share them:
an exception class the test catches is the one the operator raises. Files load under a private
module name with their folder first on ``sys.path`` (:class:`SiblingModules`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import itertools
import os
import sys
import threading
import types
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ktest.errors import OperatorError
from ktest.operators.logs import format_exception

Source = str | Path
_lock = threading.RLock()  # SiblingModules.release() may run inside load_registry
_counter = itertools.count(1)
_SHARED_PACKAGES = frozenset({"kopf", "ktest", "kubernetes", "aiohttp", "asyncio"})
_MISSING = object()


def is_path(source: Source) -> bool:
    """A file path (``x.py`` or containing a slash) rather than a module name."""
    text = str(source)
    return isinstance(source, Path) or text.endswith(".py") or "/" in text


def load_registry(sources: Sequence[Source], siblings: SiblingModules) -> Any:
    """A new ``kopf.OperatorRegistry`` holding the handlers of ``sources`` (modules or files).

    Files are run with their folder first on ``sys.path``; ``siblings`` (one per run) keeps
    that entry and the sibling modules the files imported until the run ends
    (:meth:`SiblingModules.release`).
    """
    import kopf

    registry = kopf.OperatorRegistry()
    with _lock:
        previous = kopf.get_default_registry()
        kopf.set_default_registry(registry)
        modules = _ModuleSwap()
        try:
            for source in sources:
                if is_path(source):
                    _exec_file(Path(source), modules, siblings)
                else:
                    _import_fresh(str(source), modules)
        except BaseException:
            siblings.release()
            raise
        finally:
            kopf.set_default_registry(previous)
            modules.restore()
    if handler_count(registry) == 0:
        raise OperatorError(
            f"kopf operator {describe_sources(sources)} registered no handlers. Its decorators must use "
            "kopf's default registry (plain @kopf.on.create(...), no registry=...) so that ktest can "
            "load them into a registry of its own; or the name points at the wrong module."
        )
    return registry


RESOURCE_REGISTRIES = ("_indexing", "_watching", "_spawning", "_changing")
"""The parts of a ``kopf.OperatorRegistry`` that hold resource handlers."""
_ALL_REGISTRIES = ("_activities", *RESOURCE_REGISTRIES, "_webhooks")


def registry_handlers(registry: Any, parts: Sequence[str] = _ALL_REGISTRIES) -> list[Any]:
    """The handlers in ``parts`` of a registry (default: all of them)."""
    return [handler for part in parts for handler in getattr(registry, part).get_all_handlers()]


def handler_count(registry: Any) -> int:
    """How many handlers (of every kind) a registry holds."""
    return len(registry_handlers(registry))


def describe_sources(sources: Iterable[Source]) -> str:
    return ", ".join(str(source) for source in sources)


class _ModuleSwap:
    """``sys.modules`` entries taken out for a fresh import, and how to put them back."""

    def __init__(self) -> None:
        self.saved: dict[str, types.ModuleType | None] = {}
        self.packages: set[str] = set()
        self.attributes: dict[tuple[str, str], object] = {}
        self.shared: set[str] = set()  # the package's modules left in place, shared with the run

    def take_out_package(self, top: str, name: str) -> None:
        """Take ``name`` and the package's modules that use kopf out of ``sys.modules``."""
        self.packages.add(top)
        for key in [key for key in sys.modules if self._in_packages(key)]:
            if key == name or _uses_kopf(sys.modules[key]):
                self.saved.setdefault(key, sys.modules.pop(key))
            else:
                self.shared.add(key)
        self._save_attribute(name)

    def _save_attribute(self, name: str) -> None:
        """The parent package's attribute for ``name``: importing a submodule sets it."""
        parent_name, _, child = name.rpartition(".")
        parent = sys.modules.get(parent_name) if parent_name else None
        if parent is not None and (parent_name, child) not in self.attributes:
            self.attributes[(parent_name, child)] = parent.__dict__.get(child, _MISSING)

    def add_private(self, name: str, module: types.ModuleType) -> None:
        self.saved.setdefault(name, None)
        sys.modules[name] = module

    def restore(self) -> None:
        kept = self.saved.keys() | self.shared
        for key in [key for key in sys.modules if key not in kept and self._in_packages(key)]:
            del sys.modules[key]
        for key, module in self.saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module
        for (parent_name, child), value in self.attributes.items():
            parent = sys.modules.get(parent_name)
            if parent is None:
                continue
            if value is _MISSING:
                parent.__dict__.pop(child, None)
            else:
                setattr(parent, child, value)

    def _in_packages(self, key: str) -> bool:
        return key.partition(".")[0] in self.packages


def _uses_kopf(module: types.ModuleType | None) -> bool:
    """Whether a module holds kopf (``import kopf``): only such a module can register handlers."""
    return module is not None and any(
        (value.__name__ if isinstance(value, types.ModuleType) else str(getattr(value, "__module__", "")))
        .partition(".")[0] == "kopf"
        for value in list(vars(module).values())
        if isinstance(value, types.ModuleType) or callable(value)
    )


def _import_fresh(name: str, modules: _ModuleSwap) -> None:
    top = name.partition(".")[0]
    if top in _SHARED_PACKAGES:
        raise OperatorError(f"{name!r} is not an operator module; pass the module with your kopf handlers.")
    modules.take_out_package(top, name)
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name and (name == error.name or name.startswith(error.name + ".")):
            raise OperatorError(
                f"kopf operator module {name!r} was not found: {error}. It must be importable from "
                "sys.path (the tests' rootdir or an installed package), or pass a file path instead."
            ) from None
        raise _import_error(name, error) from None
    except Exception as error:
        raise _import_error(name, error) from None


def _exec_file(path: Path, modules: _ModuleSwap, siblings: SiblingModules) -> None:
    path = path.expanduser().resolve()
    if not path.is_file():
        raise OperatorError(f"kopf operator file {path} does not exist; pass the path of a .py file.")
    name = f"_ktest_kopf_{_identifier(path.stem)}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise OperatorError(f"kopf operator file {path} cannot be loaded as a Python module.")
    module = importlib.util.module_from_spec(spec)
    modules.add_private(name, module)  # dataclasses and pickling look the module up while it executes
    with siblings.importing_from(path.parent):
        try:
            spec.loader.exec_module(module)
        except Exception as error:
            raise _import_error(str(path), error) from None


class SiblingModules:
    """The folders one run put on ``sys.path`` and the sibling modules imported from them.

    ``kopf run src/handlers.py`` puts ``src/`` first on ``sys.path`` so the operator imports its
    neighbours; ktest does the same while the run lasts and undoes it when the run ends: the
    folder leaves ``sys.path``, and the siblings the run imported leave ``sys.modules`` (the next
    run, or an operator with a same-named sibling elsewhere, imports its own copy). A sibling the
    test imported before the run is shared, never re-executed. A same-named module from elsewhere
    (the test suite's own ``cache``) is set aside while the file is imported, unless it is part of
    Python or an installed package (a sibling ``secrets.py`` never replaces the standard library's).
    """

    def __init__(self) -> None:
        self.folders: list[str] = []
        self.modules: dict[str, types.ModuleType] = {}
        self.kept: dict[str, types.ModuleType] = {}
        """Modules of those folders imported before the run: shared, never removed."""

    @contextlib.contextmanager
    def importing_from(self, folder: Path) -> Iterator[None]:
        """Import with ``folder`` first on ``sys.path`` (kept there until :meth:`release`)."""
        entry = str(folder)
        sys.path.insert(0, entry)
        self.folders.append(entry)
        before = dict(sys.modules)
        for name, module in before.items():
            if _module_in(module, folder):
                self.kept.setdefault(name, module)
        shadowing = {
            name: module
            for name, module in before.items()
            if "." not in name
            and _sibling_exists(folder, name)
            and not _module_in(module, folder)
            and not _installed(name, module)
        }
        for name in shadowing:
            del sys.modules[name]
        try:
            yield
        finally:
            for name, module in list(sys.modules.items()):
                if before.get(name) is not module and _module_in(module, folder):
                    self.modules[name] = module
            for name, module in shadowing.items():
                for key in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
                    if _module_in(sys.modules[key], folder):
                        del sys.modules[key]
                sys.modules[name] = module

    def release(self) -> None:
        """Take the run's folders off ``sys.path`` and its sibling modules out of ``sys.modules``
        (those imported later, inside handlers, too); modules that were there before stay."""
        with _lock:
            for entry in self.folders:
                with contextlib.suppress(ValueError):
                    sys.path.remove(entry)  # one entry: another run from the same folder keeps its own
            folders = [Path(entry) for entry in self.folders]
            for name, module in list(sys.modules.items()):
                if self.kept.get(name) is module:
                    continue
                if self.modules.get(name) is module or any(_module_in(module, f) for f in folders):
                    del sys.modules[name]
            self.folders.clear()
            self.modules.clear()
            self.kept.clear()


def _installed(name: str, module: object) -> bool:
    """Part of Python or of an installed package: never set aside, whatever the operator's folder
    holds (other code imported meanwhile needs the real ``secrets`` or ``yaml``)."""
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return True
    prefixes = tuple({_resolved(root) + os.sep for root in (sys.prefix, sys.base_prefix, sys.exec_prefix)})
    return any(location.startswith(prefixes) for location in _locations(module))


def _sibling_exists(folder: Path, name: str) -> bool:
    return (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()


def _module_in(module: object, folder: Path) -> bool:
    """Whether ``module`` was loaded from a file (or is a package) inside ``folder``."""
    return any(location.startswith(str(folder) + os.sep) for location in _locations(module))


def _locations(module: object) -> list[str]:
    """Where ``module`` was loaded from (its file, its package folders), symlinks resolved."""
    found = [getattr(module, "__file__", None), *list(getattr(module, "__path__", None) or [])]
    return [_resolved(location) for location in found if isinstance(location, str) and location]


@functools.cache
def _resolved(location: str) -> str:
    """A module location with symlinks resolved (cached: every load and release asks for all)."""
    try:
        return str(Path(location).resolve())
    except OSError:
        return location


def _import_error(what: str, error: BaseException) -> OperatorError:
    return OperatorError(
        f"kopf operator {what} raised {type(error).__name__} while being imported: {error}\n"
        f"{_operator_traceback(error)}"
    )


def _operator_traceback(error: BaseException) -> str:
    """The traceback without the import machinery's frames (ktest's and importlib's)."""
    tb = error.__traceback__
    while tb is not None and _machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return format_exception(error.with_traceback(tb) if tb is not None else error)


def _machinery(filename: str) -> bool:
    return filename == __file__ or filename.startswith("<frozen") or "importlib" in filename


def _identifier(text: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in text)
