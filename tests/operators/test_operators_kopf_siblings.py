"""run_kopf(path) imports an operator file as `kopf run path` does: its folder first on sys.path,
so sibling modules import by their plain names; undone when the run ends."""

from __future__ import annotations

import sys

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
