"""run_kopf(path) imports an operator file as `kopf run path` does: its folder first on sys.path,
so sibling modules import by their plain names; undone when the run ends."""

from __future__ import annotations

import sys

import pytest
from builders import configmap, configmap_ref
from operator_helpers import SAMPLES

from ktest.cluster import Cluster
from ktest.operators import run_kopf
from ktest.wait import eventually

SIBLING = {"ktest.dev/sibling": "true"}
PACKAGE = SAMPLES / "kopf_package" / "src"
TWIN = SAMPLES / "kopf_package_twin"


def cached(admin: Cluster, ns: str, name: str) -> str | None:
    return (admin.get(configmap_ref(name, ns))["metadata"].get("annotations") or {}).get("ktest.dev/cached")


@pytest.mark.slow
def test_a_file_imports_its_sibling_modules_as_kopf_run_does(admin: Cluster, ns: str) -> None:
    path_before = list(sys.path)
    with run_kopf(PACKAGE / "handlers.py", admin, namespaces=[ns]) as op:
        assert sys.path[0] == str(PACKAGE)  # for imports inside handlers too, while it runs
        admin.create(configmap("first", ns, labels=SIBLING))
        eventually(lambda: cached(admin, ns, "first") == "1 from package")
    assert sys.path == path_before
    assert "cache" not in sys.modules
    assert "Handler 'record' succeeded" in op.logs

    # The next run, and another operator with a sibling of the same name, import their own copy.
    with run_kopf(PACKAGE / "handlers.py", admin, namespaces=[ns]):
        admin.create(configmap("second", ns, labels=SIBLING))
        eventually(lambda: cached(admin, ns, "second") == "1 from package")  # a fresh module: 1, not 2
    with run_kopf(TWIN / "handlers.py", admin, namespaces=[ns]):
        admin.create(configmap("third", ns, labels=SIBLING))
        eventually(lambda: cached(admin, ns, "third") == "1 from twin")
    assert sys.path == path_before
    assert "cache" not in sys.modules

    # A sibling the test imported itself (to inspect its state) is shared, never re-executed.
    sys.path.insert(0, str(PACKAGE))
    try:
        import cache  # the test's own import of the operator's sibling (e.g. to inspect its state)

        with run_kopf(PACKAGE / "handlers.py", admin, namespaces=[ns]):
            admin.create(configmap("shared", ns, labels=SIBLING))
            eventually(lambda: cached(admin, ns, "shared") == "1 from package")
            assert cache._seen == ["shared"]  # the operator used the test's module, not a copy
        assert sys.modules["cache"] is cache  # and left it where it was
        # ... and does not shadow another operator's sibling of the same name.
        with run_kopf(TWIN / "handlers.py", admin, namespaces=[ns]):
            admin.create(configmap("fourth", ns, labels=SIBLING))
            eventually(lambda: cached(admin, ns, "fourth") == "1 from twin")
        assert sys.modules["cache"] is cache
    finally:
        sys.path.remove(str(PACKAGE))
        sys.modules.pop("cache", None)


MODULE_PACKAGE = SAMPLES / "kopf_module_package"


def test_a_module_name_shares_the_packages_modules_the_test_imported(admin: Cluster, ns: str) -> None:
    """run_kopf("shop.handlers") executes the handler module afresh (its handlers register into the
    run's registry, every run) but shares ``shop.storage``, which uses no kopf, with the test: what
    the operator stores the test sees, and the exception class is one class."""
    sys.path.insert(0, str(MODULE_PACKAGE))
    try:
        from shop import storage

        for run, name in enumerate(("first", "second")):
            with run_kopf("shop.handlers", admin, namespaces=[ns]):
                admin.create(configmap(name, ns, labels={"ktest.dev/shop": "true"}))
                eventually(lambda name=name: admin.get(configmap_ref(name, ns))["metadata"]
                           .get("annotations", {}).get("ktest.dev/stored") == "yes")
                assert storage.stored == ["first", "second"][: run + 1]  # the test's module, not a copy
            assert sys.modules["shop.storage"] is storage
            assert "shop.handlers" not in sys.modules  # the run's copy is gone again
        import shop

        assert not hasattr(shop, "handlers"), "the package keeps no attribute for the run's module"
    finally:
        sys.path.remove(str(MODULE_PACKAGE))
        for key in [key for key in sys.modules if key == "shop" or key.startswith("shop.")]:
            del sys.modules[key]
