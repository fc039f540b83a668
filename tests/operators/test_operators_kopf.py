"""kopf operators in-process: fresh registry per run, test-cluster credentials, readiness, failures."""

from __future__ import annotations

import importlib
import sys
import threading

import kopf
import pytest
from builders import configmap, configmap_ref
from operator_helpers import SAMPLES

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operators import run_kopf
from ktest.operators.kopf.loading import handler_count
from ktest.run_context import check_health, run_context
from ktest.wait import eventually

MIRROR = {"ktest.dev/kopf-copy": "true"}


_EARLIER_THREADS: set[threading.Thread] = set()


@pytest.fixture(autouse=True)
def _earlier_threads() -> None:
    """Threads alive before the test: another test's operator is not this test's to judge."""
    _EARLIER_THREADS.clear()
    _EARLIER_THREADS.update(threading.enumerate())


def kopf_threads() -> list[threading.Thread]:
    """kopf threads started during this test that are still alive."""
    alive = threading.enumerate()
    return [t for t in alive if t.name.startswith("ktest-kopf-") and t not in _EARLIER_THREADS]


def handled(admin: Cluster, ns: str, name: str) -> str | None:
    annotations = admin.get(configmap_ref(name, ns))["metadata"].get("annotations") or {}
    return annotations.get("ktest.dev/handled")


def copied(admin: Cluster, ns: str, name: str, data: dict[str, str]) -> None:
    copy = admin.get(configmap_ref(f"{name}-kopf", ns))
    assert copy["data"] == data
    assert copy["metadata"]["ownerReferences"][0]["name"] == name


@pytest.mark.parametrize("source", ["module", "file"])
def test_kopf_operator_starts_becomes_ready_and_reconciles(admin: Cluster, ns: str, source: str) -> None:
    target = "sample_operators.kopf_mirror" if source == "module" else SAMPLES / "kopf_mirror.py"
    with run_kopf(target, admin, namespaces=[ns]) as op:
        assert op.alive
        admin.create(configmap("a", ns, {"k": "v"}, labels=MIRROR))
        eventually(lambda: copied(admin, ns, "a", {"k": "v"}))
        admin.patch(configmap_ref("a", ns), {"data": {"k": "v2"}})
        eventually(lambda: copied(admin, ns, "a", {"k": "v2"}))
    assert not op.alive
    assert "Handler 'copy/spec.data' succeeded" in op.logs or "Handler 'copy' succeeded" in op.logs
    assert "Activity 'ktest-test-cluster-login' succeeded" in op.logs
    assert not kopf_threads()


@pytest.mark.slow
def test_cluster_wide_operator_serves_every_namespace(admin: Cluster, ns: str) -> None:
    # `ns` was there before the operator started, `later` is made after: names unlike each
    # other, so no list or glob of namespaces would serve both by chance.
    with (
        run_kopf("sample_operators.kopf_mirror", admin, cluster_wide=True),
        admin.namespace(prefix="later", background=True) as later,
    ):
        for namespace in (ns, later):
            admin.create(configmap("wide", namespace, {"from": namespace}, labels=MIRROR))
        for namespace in (ns, later):
            eventually(lambda namespace=namespace: copied(admin, namespace, "wide", {"from": namespace}))


def test_crash_then_restart_still_converges(admin: Cluster, ns: str) -> None:
    with run_kopf("sample_operators.kopf_mirror", admin, namespaces=[ns]) as op:
        first_registry = op.registry
        op.crash()
        assert not op.alive and op.error is None
        admin.create(configmap("late", ns, {"x": "1"}, labels=MIRROR))
        assert admin.get_or_none(configmap_ref("late-kopf", ns)) is None
        op.restart()
        assert op.registry is not first_registry  # each run loads the handlers afresh
        eventually(lambda: copied(admin, ns, "late", {"x": "1"}))
    assert "crashed sample_operators.kopf_mirror on purpose" in op.logs
    assert "Stop-flag is set" not in op.logs.split("crashed")[0]  # the crash was not a graceful stop


def test_running_twice_does_not_double_register_handlers(admin: Cluster, ns: str) -> None:
    # The test itself imports the module too: its handlers land in kopf's default registry.
    imported = importlib.import_module("sample_operators.kopf_counting")
    default_before = handler_count(kopf.get_default_registry())
    counts = []
    for run in range(2):
        with run_kopf("sample_operators.kopf_counting", admin, namespaces=[ns]) as op:
            counts.append(handler_count(op.registry))
            admin.create(configmap(f"c{run}", ns, labels={"ktest.dev/counted": "true"}))
            eventually(lambda run=run: handled(admin, ns, f"c{run}") == "1")
    # one resource handler + ktest's login handler, in each run
    assert counts == [2, 2]
    assert sys.modules["sample_operators.kopf_counting"] is imported  # the test's module was put back
    assert imported.IMPORTS == ["sample_operators.kopf_counting"]  # and never re-executed in place
    assert handler_count(kopf.get_default_registry()) == default_before  # nothing leaked into it
    for run in range(2):  # each object was handled exactly once
        assert handled(admin, ns, f"c{run}") == "1"


def test_error_at_import_fails_with_the_error_and_leaves_nothing_running(admin: Cluster) -> None:
    with run_context("test-scope") as scope:
        with pytest.raises(OperatorError) as raised:
            run_kopf("sample_operators.kopf_broken_import", admin, cluster_wide=True)
        assert not scope.health_checks
    message = str(raised.value)
    assert "raised RuntimeError while being imported" in message
    assert "boom at import: OPERATOR_MODE must be 'strict' or 'lenient'" in message
    assert "kopf_broken_import.py" in message  # the traceback points at the file
    assert not kopf_threads()
    assert "sample_operators.kopf_broken_import" not in sys.modules


def test_exception_in_a_handler_reaches_the_test(admin: Cluster, ns: str) -> None:
    with run_context("test-scope"):
        op = run_kopf("sample_operators.kopf_failing_handler", admin, namespaces=[ns])
        admin.create(configmap("bad", ns, labels={"ktest.dev/explode": "true"}))
        with pytest.raises(OperatorError) as raised:
            eventually(lambda: False, timeout=60)  # fails on the operator's error, not the timeout
        op.close()
    message = str(raised.value)
    assert "operator 'sample_operators.kopf_failing_handler' (kopf) logged an error" in message
    assert "ValueError: cannot reconcile bad: data.size must be a positive number" in message
    assert "Traceback" in message


def test_handler_errors_can_be_expected(admin: Cluster, ns: str) -> None:
    with run_kopf(
        "sample_operators.kopf_failing_handler", admin, namespaces=[ns], fail_on_errors=False
    ) as op:
        admin.create(configmap("bad", ns, labels={"ktest.dev/explode": "true"}))
        eventually(lambda: "data.size must be a positive number" in op.logs)
        assert op.error is None
        check_health()


def test_missing_crd_keeps_it_not_ready_and_says_why(admin: Cluster) -> None:
    with pytest.raises(OperatorError) as raised:
        run_kopf("sample_operators.kopf_missing_crd", admin, cluster_wide=True, ready_timeout=3)
    message = str(raised.value)
    assert "was not ready after 3 s" in message
    assert "widgets" in message and "CRD" in message
    assert not kopf_threads()


def test_bad_arguments(admin: Cluster) -> None:
    with pytest.raises(OperatorError, match="not both"):
        run_kopf("sample_operators.kopf_mirror", admin, namespaces=["a"], cluster_wide=True)
    with pytest.raises(OperatorError, match="must be a list"):
        run_kopf("sample_operators.kopf_mirror", admin, namespaces="a")  # type: ignore[arg-type]
    with pytest.raises(OperatorError, match="was not found"):
        run_kopf("sample_operators.no_such_module", admin, cluster_wide=True)
    with pytest.raises(OperatorError, match="does not exist"):
        run_kopf(SAMPLES / "no_such_file.py", admin, cluster_wide=True)
    with pytest.raises(OperatorError, match="registered no handlers"):
        run_kopf("sample_operators.mirror", admin, cluster_wide=True)
    with pytest.raises(OperatorError, match="at least one module name or file path"):
        run_kopf([], admin, cluster_wide=True)
    assert not kopf_threads()
