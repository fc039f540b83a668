"""The public API (``ktest.public_api``) stays importable, and moved names keep working with a warning."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ktest.public_api import MOVED, PUBLIC, TOP_LEVEL


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_listed_name_is_importable(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in PUBLIC[module] if not hasattr(imported, name)]
    assert not missing, f"{module} no longer offers {missing}; list it in ktest.public_api.MOVED instead"


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_every_exported_name_is_listed(module: str) -> None:
    exported = set(getattr(importlib.import_module(module), "__all__", ()))
    unlisted = sorted(exported - set(PUBLIC[module]))
    assert not unlisted, f"{module}.__all__ has {unlisted}, not listed in ktest.public_api.PUBLIC"


def test_no_public_name_shares_its_name_with_a_submodule() -> None:
    """Importing ``package.name`` (the submodule) binds ``name`` on the package to the module,
    replacing the public function of that name for whoever imported the package: which one a
    user got depended on import order (``ktest.timeline.render`` did, until its module was renamed)."""
    shadowed = []
    for module in sorted(PUBLIC):
        package = importlib.import_module(module)
        for name in PUBLIC[module]:
            if not hasattr(package, "__path__") or importlib.util.find_spec(f"{module}.{name}") is None:
                continue
            submodule = importlib.import_module(f"{module}.{name}")
            lazy = getattr(package, "__getattr__", None)  # what the package's own export resolves to
            try:
                exported = lazy(name) if lazy is not None else submodule
            except AttributeError:
                exported = submodule  # a public submodule (ktest.wait.aio): the module is the name
            if exported is not submodule:
                shadowed.append(f"{module}.{name}")
    assert not shadowed, f"submodules named like public names (rename the module): {shadowed}"


def test_the_top_level_offers_every_assertion_the_assertions_package_does() -> None:
    import ktest.assertions

    functions = {name for name in ktest.assertions.__all__ if name.startswith("assert_")}
    assert functions <= set(TOP_LEVEL), sorted(functions - set(TOP_LEVEL))


@pytest.mark.parametrize(
    ("old", "name", "new"), [(old, name, new) for old, names in MOVED.items() for name, new in names.items()]
)
def test_a_moved_name_still_imports_from_its_old_place_with_a_warning(old: str, name: str, new: str) -> None:
    module = importlib.import_module(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    [warning] = caught
    assert warning.category is DeprecationWarning
    assert f"{old}.{name} moved to {new}.{name}" in str(warning.message)
    assert warning.filename == __file__  # points at the importing code, not at ktest


def test_from_ktest_errors_import_api_error_works_as_the_examples_wrote_it() -> None:
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n    from ktest.errors import ApiError\n"
        "except DeprecationWarning as w:\n    print('warned:', w)\n"
        "warnings.simplefilter('ignore')\nfrom ktest.errors import ApiError\n"
        "from kubernetes.client import ApiException\nprint(issubclass(ApiError, ApiException))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "warned: ktest.errors.ApiError moved to ktest.errors.api.ApiError" in result.stdout
    assert result.stdout.strip().endswith("True")


def test_unknown_names_still_raise_attribute_error() -> None:
    import ktest.errors

    with pytest.raises(AttributeError, match="has no attribute 'NoSuchError'"):
        ktest.errors.NoSuchError  # noqa: B018


# Type checkers do not run ``__getattr__``: each lazily exporting package imports its public names
# under ``if TYPE_CHECKING:`` (``name as name``, the explicit re-export PEP 484 defines), from the
# module its lazy map names, and keeps ``__getattr__`` out of their sight, so that a misspelt name
# is an error rather than ``Any``. tests/test_typing.py shows what a user's type checker makes of it.
LAZY_PACKAGES = sorted(
    module for module in PUBLIC
    if "lazy_attributes(" in Path(importlib.util.find_spec(module).origin).read_text()
)


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"


def _is_not_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _is_type_checking(test.operand)


def _type_checking_imports(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """name -> (module, alias) of every ``from module import name [as alias]`` under a top-level
    ``if TYPE_CHECKING:``."""
    found: dict[str, tuple[str, str | None]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    found.update({a.name: (statement.module, a.asname) for a in statement.names})
    return found


def _type_checking_block(expected: dict[str, str]) -> str:
    lines = [f"    from {module} import {name} as {name}" for name, module in expected.items()]
    return "if TYPE_CHECKING:\n" + "\n".join(sorted(lines))


def test_every_lazily_exporting_package_is_covered() -> None:
    assert {"ktest", "ktest.operators", "ktest.assertions", "ktest.proxy", "ktest.wait"} <= set(LAZY_PACKAGES)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_public_name_has_a_type_checking_import_from_where_it_lives(package: str) -> None:
    module = importlib.import_module(package)
    lazy: dict[str, str] = module._EXPORTS
    submodules = {name: package for name in module.__all__ if name not in lazy}  # e.g. "aio"
    expected = {**lazy, **submodules}
    assert set(expected) == set(PUBLIC[package]) - {"__version__"}, "ktest.public_api.PUBLIC disagrees"
    source = Path(module.__file__)
    imports = _type_checking_imports(ast.parse(source.read_text()))
    wrong = {
        name: imports.get(name) for name, home in expected.items() if imports.get(name) != (home, name)
    }
    extra = sorted(set(imports) - set(expected))
    assert not wrong and not extra, (
        f"{source}: the TYPE_CHECKING imports differ from the lazy exports (name: (module, alias) found) "
        f"{wrong}, not exported: {extra}; the block should read (then `ruff check --fix` it):\n"
        + _type_checking_block(expected)
    )


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_lazy_getattr_is_hidden_from_type_checkers(package: str) -> None:
    source = Path(importlib.import_module(package).__file__)
    tree = ast.parse(source.read_text())
    seen = [
        node.lineno
        for node in tree.body
        if "__getattr__" in {t.id for t in ast.walk(node) if isinstance(t, ast.Name)}
        and not (isinstance(node, ast.If) and _is_not_type_checking(node.test))
    ]
    assert not seen, (
        f"{source}:{seen[0]}: __getattr__ is visible to type checkers, which then type every unknown "
        "name as Any; define it under `if not TYPE_CHECKING:`"
    )


def test_importing_the_public_packages_stays_cheap() -> None:
    packages = ("ktest", "ktest.operators", "ktest.assertions", "ktest.proxy", "ktest.wait", "ktest.assets")
    code = f"import {', '.join(packages)}, ktest.controlplane"
    heavy = (
        "kubernetes", "urllib3", "yaml", "kopf", "cryptography", "ktest.cluster", "ktest.wait.sync",
        "ktest.operators.kopf.runner", "ktest.assertions.finalizers", "ktest.proxy.server",
    )
    loaded = _heavy_modules_loaded_by(code, heavy)
    assert not loaded, f"importing the packages loaded {loaded}"


def test_the_command_line_loads_what_a_command_needs_only_when_it_runs() -> None:
    """Every ``ktest`` command builds the whole parser (each backend's subcommands and options):
    that alone must not load the cluster client or the binaries' resolution (download, Go builds,
    the cache), which made ``ktest --version`` cost 0.4 s of CPU and ``ktest status`` 0.5 s."""
    heavy = ("kubernetes", "urllib3", "ktest.assets.resolve", "ktest.assets.download",
             "ktest.assets.store", "ktest.sessions.attached")
    loaded = _heavy_modules_loaded_by("from ktest.cli.main import build_parser\nbuild_parser()", heavy)
    assert not loaded, f"building the ktest parser loaded {loaded}"


def _heavy_modules_loaded_by(code: str, heavy: tuple[str, ...]) -> list[str]:
    """Which of ``heavy`` a fresh interpreter has imported after running ``code``."""
    check = f"{code}\nimport sys\nprint(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    loaded: list[str] = ast.literal_eval(result.stdout.strip())
    return loaded


def test_every_async_twin_is_typed_from_its_assertion() -> None:
    """``ktest.assertions.aio`` makes its twins in ``__getattr__``, which type checkers do not run:
    under ``if TYPE_CHECKING:`` each is ``_threaded(<its module>.<its name>)``, so mypy and pyright
    see the assertion's own parameters and result (tests/typed_usage/misuse.py shows them)."""
    from ktest.public_api import ASSERTIONS

    source = Path(importlib.util.find_spec("ktest.assertions.aio").origin)
    typed: dict[str, str] = {}
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.body:
                if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call):
                    [target] = statement.targets
                    assert isinstance(target, ast.Name)
                    typed[target.id] = ast.unparse(statement.value)
    expected = {name: f"_threaded(_{module}.{name})" for name, (module, _) in ASSERTIONS.items()}
    assert typed == expected, f"{source}: the TYPE_CHECKING twins differ from ktest.public_api.ASSERTIONS"


def test_registering_the_backends_through_the_door_stays_cheap() -> None:
    """The registry reads every backend's registration (built-in ones from their packages, made
    with ``ktest.extension.BackendSpec``): the door imports its names on first use, so registering
    loads no client, no settings module and no backend machinery."""
    code = (
        "from ktest import backend_registry\nbackend_registry.backends()\n"
        "import ktest.extension\nktest.extension.BackendSpec, ktest.extension.setting"
    )
    heavy = (
        "kubernetes", "urllib3", "yaml", "cryptography", "ktest.config", "ktest.sessions.backend",
        "ktest.base.janitor_client", "ktest.backends.bare.backend", "ktest.backends.kind.backend",
    )
    loaded = _heavy_modules_loaded_by(code, heavy)
    assert not loaded, f"registering the backends loaded {loaded}"


def _package_inits() -> list[str]:
    import pkgutil

    import ktest

    return ["ktest", *(m.name for m in pkgutil.walk_packages(ktest.__path__, "ktest.") if m.ispkg)]


def _defined_names(tree: ast.Module) -> list[str]:
    """The names a module's top level defines (functions, classes, assignments), imports aside."""
    names: list[str] = []
    statements = list(tree.body)
    for node in statements:
        if isinstance(node, ast.If | ast.Try):  # ``if TYPE_CHECKING:``, ``try: ... except ImportError:``
            statements += [*node.body, *node.orelse, *getattr(node, "finalbody", ())]
            statements += [s for handler in getattr(node, "handlers", ()) for s in handler.body]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


PUBLIC_LOOKING = sorted({*PUBLIC, *_package_inits()})
"""Where a user looks for names: the modules ``PUBLIC`` lists and every package's ``__init__``."""


@pytest.mark.parametrize("module", PUBLIC_LOOKING)
def test_a_public_looking_module_defines_no_name_it_does_not_list(module: str) -> None:
    """One registration per public name: a name without a leading underscore, in a module a user
    imports from, is in ``ktest.public_api.PUBLIC`` (imports are not re-exports, as PEP 484 has it
    for typed packages); anything else is private by its name or by its module's."""
    source = Path(importlib.util.find_spec(module).origin)
    listed = {*PUBLIC.get(module, ()), *MOVED.get(module, {})}
    unlisted = [
        name for name in _defined_names(ast.parse(source.read_text()))
        if not name.startswith("_") and name not in listed
    ]
    assert not unlisted, (
        f"{source} defines {unlisted}: they look public but are not listed in ktest.public_api.PUBLIC"
        f"[{module!r}]. List each that users need (with a docstring: docs/reference is made from it, "
        "`make reference`); start the others with an underscore or move them to a private module"
    )


DOCS_ABOUT_INTERNALS = ("docs/architecture.md",)
"""Pages for ktest's contributors, which show its private modules on purpose."""


def test_the_docs_import_only_public_names() -> None:
    """A user copies imports from the docs: each must name a listed name where it is listed."""
    root = Path(__file__).resolve().parents[1]
    statement = re.compile(r"^\s*from (ktest[\w.]*) import (\([^)]*\)|[^\n]+)", re.MULTILINE)
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    private = []
    for page in pages:
        if str(page.relative_to(root)) in DOCS_ABOUT_INTERNALS or page.parent.name == "reference":
            continue
        for match in statement.finditer(page.read_text()):
            module, names = match[1], match[2].strip("()").replace("\n", " ")
            for name in (part.split("#")[0].split(" as ")[0].strip() for part in names.split(",")):
                if name and name not in PUBLIC.get(module, ()) and f"{module}.{name}" not in PUBLIC:
                    private.append(f"{page.relative_to(root)}: from {module} import {name}")
    assert not private, f"the docs import names not public there (ktest.public_api.PUBLIC): {private}"
