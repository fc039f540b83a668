"""The public API (``ktest.public_api``) stays importable, and moved names keep working with a warning."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

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
    assert "warned: ktest.errors.ApiError moved to ktest.api_error.ApiError" in result.stdout
    assert result.stdout.strip().endswith("True")


def test_unknown_names_still_raise_attribute_error() -> None:
    import ktest.errors

    with pytest.raises(AttributeError, match="has no attribute 'NoSuchError'"):
        ktest.errors.NoSuchError  # noqa: B018
