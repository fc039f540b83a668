"""The fixtures, namespaces, failure reports and health checks, end to end through pytester.

The inner runs use backend ``existing`` against the session's control plane.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from builders import crd_yaml
from inner_runs import printed

from ktest.cluster import Cluster
from ktest.controlplane import ControlPlane

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def test_cluster_and_namespace_fixtures(
    pytester: pytest.Pytester, existing_args: list[str], admin: Cluster
) -> None:
    admin.create_namespace("user-owned-ns")  # must survive the inner run
    pytester.makepyfile(
        test_names="""
        import pytest

        def test_one(cluster, namespace, worker_namespace_selector):
            ns = cluster.get(("v1", "Namespace", namespace))
            assert ns["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "ktest"
            assert ns["metadata"]["labels"]["ktest.dev/worker"] == "main"  # no xdist
            assert worker_namespace_selector == "ktest.dev/worker=main"
            assert ns["status"]["phase"] == "Active"
            cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                           "data": {"k": "v"}}, namespace=namespace)
            assert cluster.get(("v1", "ConfigMap", "c", namespace))["data"] == {"k": "v"}
            print("NS", namespace)

        def test_with_a_rather_long_name_that_would_not_fit_in_a_dns_label_on_its_own(namespace):
            print("NS", namespace)

        @pytest.mark.parametrize("value", ["A/B", "c_d"])
        def test_param(namespace, value):
            print("NS", namespace)
        """
    )
    result = pytester.runpytest_inprocess("-s", *existing_args)
    result.assert_outcomes(passed=4)
    names = printed(result, "NS ")
    assert len(names) == 4 and len(set(names)) == 4
    for name in names:
        assert DNS_LABEL.match(name) and len(name) <= 63, name
        assert admin.get_or_none(("v1", "Namespace", name)) is None, f"{name} was not deleted"
    assert names[0].startswith("test-names-py-test-one-")
    assert names[2].startswith("test-names-py-test-param-a-b-")
    assert admin.exists(("v1", "Namespace", "user-owned-ns"))
    result.stdout.fnmatch_lines(["cluster: existing cluster https://127.0.0.1:* (context ktest-admin@ktest*"])
    admin.delete_namespace("user-owned-ns")


def test_keep_namespaces_on_failure(
    pytester: pytest.Pytester, existing_args: list[str], admin: Cluster
) -> None:
    pytester.makepyfile(
        """
        def test_passes(namespace):
            print("NS", namespace)

        def test_fails(namespace):
            print("NS", namespace)
            assert False
        """
    )
    result = pytester.runpytest_inprocess("-s", "--ktest-keep-namespaces=on-failure", *existing_args)
    result.assert_outcomes(passed=1, failed=1)
    passed_ns, failed_ns = printed(result, "NS ")
    assert admin.get_or_none(("v1", "Namespace", passed_ns)) is None
    assert admin.exists(("v1", "Namespace", failed_ns))
    result.stdout.fnmatch_lines([f"*KeptNamespaceWarning: kept namespace {failed_ns}*"])
    admin.delete_namespace(failed_ns)


CRD = crd_yaml("report.example.com", "Gizmo", status=True)


def test_failure_report_and_stuck_finalizer(
    pytester: pytest.Pytester, existing_args: list[str], admin: Cluster
) -> None:
    pytester.makefile(".yaml", crd=CRD)
    pytester.makepyfile(
        """
        from ktest.run_context import add_report_section

        def test_broken(cluster, namespace):
            print("NS", namespace)
            add_report_section("operator log", lambda: "reconciling gizmo g1\\nfailed: quota")
            cluster.create({"apiVersion": "report.example.com/v1", "kind": "Gizmo",
                            "metadata": {"name": "g1", "finalizers": ["report.example.com/cleanup"]},
                            "spec": {"size": 1}}, namespace=namespace)
            ref = ("report.example.com/v1", "Gizmo", "g1", namespace)
            cluster.patch(ref, {"status": {"observedGeneration": 1, "conditions": [
                {"type": "Ready", "status": "False", "reason": "QuotaExceeded", "message": "no room",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, subresource="status")
            cluster.patch(ref, {"spec": {"size": 2}})
            cluster.create({"apiVersion": "v1", "kind": "Event",
                            "metadata": {"name": "g1.1"},
                            "involvedObject": {"kind": "Gizmo", "name": "g1", "namespace": namespace},
                            "reason": "ProvisionFailed", "message": "bucket quota exceeded",
                            "type": "Warning"}, namespace=namespace)
            assert False, "the operator never became ready"
        """
    )
    result = pytester.runpytest_inprocess(
        "-s", "--ktest-crds=crd.yaml", "--ktest-finalizer-grace=0.5", *existing_args
    )
    result.assert_outcomes(failed=1)
    (name,) = printed(result, "NS ")
    result.stdout.fnmatch_lines(
        [
            "*ktest: operator log*",
            "reconciling gizmo g1",
            "failed: quota",
            f"*ktest: namespace {name}*",
            f"objects in namespace {name}: 1",
            "  Gizmo/g1 (report.example.com/v1) generation 2, observedGeneration 1 "
            "(status is behind the spec)",
            "    condition Ready=False (QuotaExceeded: no room)",
            "    finalizers: report.example.com/cleanup",
            f"events in namespace {name}: 1",
            "  * Warning ProvisionFailed Gizmo/g1: bucket quota exceeded",
        ]
    )
    # Background deletion (the default): the finalizer nobody removes was reported, removed,
    # and the namespace is gone by the end of the session.
    result.stdout.fnmatch_lines(
        [
            f"*NamespaceCleanupWarning: namespace of *::test_broken: namespace {name} "
            "was held in Terminating by:",
            f"*Gizmo {name}/g1 (report.example.com/v1) (finalizers: report.example.com/cleanup)",
            "*ktest removed these finalizers*",
        ]
    )
    assert admin.get_or_none(("v1", "Namespace", name)) is None
    admin.delete(("apiextensions.k8s.io/v1", "CustomResourceDefinition", "gizmos.report.example.com"))


def test_operator_health_checks_fail_tests(pytester: pytest.Pytester, existing_args: list[str]) -> None:
    pytester.makepyfile(
        """
        import pytest
        from ktest.run_context import add_health_check
        from ktest.errors import OperatorError

        crashed = []

        def check():
            if crashed:
                raise OperatorError("operator crashed: " + crashed[0])

        @pytest.fixture(scope="session")
        def operator():
            remove = add_health_check(check)
            yield
            remove()

        def test_local_check(operator):
            def local():
                raise OperatorError("local operator died")
            add_health_check(local)

        def test_crash_during_test():
            crashed.append("KeyError 'spec'")

        def test_later_test_sees_it_too():
            pass
        """
    )
    reports = pytester.inline_run(*existing_args)
    failures = {report.nodeid.split("::")[-1]: str(report.longrepr) for report in reports.getfailures()}
    assert sorted(failures) == ["test_crash_during_test", "test_later_test_sees_it_too", "test_local_check"]
    assert "OperatorError: local operator died" in failures["test_local_check"]
    assert "OperatorError: operator crashed: KeyError 'spec'" in failures["test_crash_during_test"]
    # The session-scoped operator's check outlives the test that set it up.
    assert "OperatorError: operator crashed: KeyError 'spec'" in failures["test_later_test_sees_it_too"]


def test_health_check_passes_when_operator_is_fine(
    pytester: pytest.Pytester, existing_args: list[str]
) -> None:
    pytester.makepyfile(
        """
        from ktest.run_context import add_health_check

        calls = []

        def test_fine():
            add_health_check(lambda: calls.append(1))

        def test_check_ran_and_is_gone():
            assert calls == [1]  # ran once after test_fine, not registered for this test
        """
    )
    result = pytester.runpytest_inprocess(*existing_args)
    result.assert_outcomes(passed=2)


def test_control_plane_fixture_skips_on_existing(pytester: pytest.Pytester, existing_args: list[str]) -> None:
    pytester.makepyfile("def test_cp(control_plane):\n    pass\n")
    result = pytester.runpytest_inprocess("-rs", *existing_args)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        ["*the control_plane fixture needs the embedded control plane in this process*existing cluster*"]
    )


def test_existing_refuses_a_context_that_is_not_current(
    pytester: pytest.Pytester, plane: ControlPlane, inner_env: dict, tmp_path: Path
) -> None:
    config = yaml.safe_load(plane.kubeconfig.read_text())
    production = dict(config["contexts"][0], name="production")
    config["contexts"].append(production)
    config["current-context"] = "production"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    pytester.makepyfile("def test_x(cluster):\n    pass\n")

    result = pytester.runpytest_inprocess(
        "--ktest-backend=existing", f"--ktest-kubeconfig={kubeconfig}", "--ktest-context=ktest-admin@ktest"
    )
    # checked before any request, when the first test asks for the cluster
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*refusing to run: the current context of * is 'production', not 'ktest-admin@ktest'*"]
    )

    result = pytester.runpytest_inprocess(
        "--ktest-backend=existing", f"--ktest-kubeconfig={kubeconfig}", "--ktest-context=staging"
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*context 'staging' is not in * (it has: ktest-admin@ktest, production)*"])


def test_background_namespace_deletion(
    pytester: pytest.Pytester, existing_args: list[str], admin: Cluster
) -> None:
    pytester.makefile(".yaml", crd=CRD)
    pytester.makepyfile(
        """
        seen = []

        def test_first(cluster, namespace):
            seen.append(namespace)
            cluster.create({"apiVersion": "report.example.com/v1", "kind": "Gizmo",
                            "metadata": {"name": "held", "finalizers": ["report.example.com/cleanup"]}},
                           namespace=namespace)

        def test_second(cluster):
            # The first test's teardown did not wait: its namespace is still being deleted.
            first = cluster.get(("v1", "Namespace", seen[0]))
            assert first["metadata"].get("deletionTimestamp")
            print("NS", seen[0])
        """
    )
    result = pytester.runpytest_inprocess(
        "-s",
        "--ktest-crds=crd.yaml",
        "--ktest-namespace-deletion=background",
        "--ktest-finalizer-grace=1",
        *existing_args,
    )
    result.assert_outcomes(passed=2)
    (name,) = printed(result, "NS ")
    assert admin.get_or_none(("v1", "Namespace", name)) is None, "deletions are waited for by session end"
    result.stdout.fnmatch_lines(
        [
            "*NamespaceCleanupWarning: namespace of test_background_namespace_deletion.py::test_first: "
            f"namespace {name} was held in Terminating by:",
            f"*Gizmo {name}/held (report.example.com/v1) (finalizers: report.example.com/cleanup)",
        ]
    )
    admin.delete(("apiextensions.k8s.io/v1", "CustomResourceDefinition", "gizmos.report.example.com"))


def test_the_fixtures_module_lists_every_fixture_with_its_scope_and_home(
    pytester: pytest.Pytester, inner_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ktest.plugin.fixtures`` is where a reader sees every fixture: its list must match what a
    real pytest session registers (bare and kind), scope and defining module included. The sessions
    run in this process, collecting only, with the collector the reference page's build uses."""
    import ktest.plugin.fixtures

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "docs"))
    import hooks  # docs/hooks.py: its collector lists what a session registers, as the reference does

    registered_by_session: dict[str, dict[str, str]] = {}
    for backend in hooks.BACKENDS_WITH_FIXTURES:
        collector = hooks.FixtureCollector()
        result = pytester.runpytest_inprocess("--collect-only", "-q", "--ktest-backend", backend,
                                              plugins=[collector])
        assert collector.found, f"a {backend} session registered no ktest fixture:\n{result.stdout.str()}"
        registered_by_session.update(collector.found)

    entry = re.compile(r"^- ``(\w+)`` \((\w+); (?:defined here|in ([\w.]+))\): \S", re.MULTILINE)
    listed = {
        name: (scope, module or "ktest.plugin.fixtures")
        for name, scope, module in entry.findall(ktest.plugin.fixtures.__doc__ or "")
    }
    registered = {name: (found["scope"], found["module"]) for name, found in registered_by_session.items()}
    differ = sorted(name for name in {*listed, *registered} if listed.get(name) != registered.get(name))
    assert not differ, (
        "ktest/plugin/fixtures.py's list differs from the fixtures a pytest session registers "
        f"(name: listed, registered as (scope, module)): "
        f"{ {name: (listed.get(name), registered.get(name)) for name in differ} }"
    )
