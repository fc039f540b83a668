"""ktest_crds: CRDs installed once per session and served before the first test; every error named.

Each test uses its own API group, so the CRDs of one test never meet another's
on the shared control plane.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import crd_yaml
from inner_runs import NON_STRUCTURAL_CRD

from ktest.cluster import Cluster

CRD_API = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def setup_errors(reports: pytest.HookRecorder) -> list[str]:
    return [
        str(report.longrepr)
        for report in reports.getreports("pytest_runtest_logreport")
        if report.when == "setup" and report.failed
    ]


def remove_crds(admin: Cluster, group: str) -> None:
    for item in admin.list(*CRD_API):
        if item["spec"]["group"] == group:
            admin.delete(item, missing_ok=True)


def test_crd_directory_with_multi_document_files(
    pytester: pytest.Pytester, existing_args: list[str], admin: Cluster
) -> None:
    group = "multi.example.com"
    crds = pytester.path / "config" / "crd"
    (crds / "more").mkdir(parents=True)
    (crds / "apps.yaml").write_text(crd_yaml(group, "Apple") + "---\n" + crd_yaml(group, "Pear"))
    (crds / "more" / "fruit.yml").write_text(
        "# a comment, then an empty document\n---\n"
        + crd_yaml(group, "Plum", versions=("v1", "v2"))
        + "---\n"
        + crd_yaml(group, "Fig")
    )
    (crds / "kustomization.yaml").write_text("resources: [apps.yaml]\n")  # not a CRD: ignored
    pytester.makeini("[pytest]\nktest_crds = config/crd\n")
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.parametrize("kind,version", [("Apple", "v1"), ("Pear", "v1"), ("Plum", "v1"),
                                                  ("Plum", "v2"), ("Fig", "v1")])
        def test_kind_is_served(cluster, namespace, kind, version):
            obj = cluster.create({{"apiVersion": "{group}/" + version, "kind": kind,
                                  "metadata": {{"name": "x"}}, "spec": {{"n": 1}}}}, namespace=namespace)
            assert obj["spec"] == {{"n": 1}}
        """
    )
    try:
        result = pytester.runpytest_inprocess(*existing_args)
        result.assert_outcomes(passed=5)
    finally:
        remove_crds(admin, group)


def test_crd_file_that_is_not_yaml(pytester: pytest.Pytester, existing_args: list[str]) -> None:
    pytester.path.joinpath("broken.yaml").write_text(
        crd_yaml("broken.example.com", "Nut") + "---\nmetadata:\n  name: [unclosed\n"
    )
    pytester.makepyfile("def test_x(cluster):\n    pass\n")
    reports = pytester.inline_run("--ktest-crds=broken.yaml", *existing_args)
    (error,) = setup_errors(reports)
    line = len(crd_yaml("broken.example.com", "Nut").splitlines()) + 4
    # checked before the cluster is opened, naming the setting, the file and the line
    assert error.startswith("ktest: option --ktest-crds: ")
    assert f"broken.yaml: line {line}, column 1: not valid YAML" in error


def test_non_crd_document_in_a_crd_path(pytester: pytest.Pytester, existing_args: list[str]) -> None:
    pytester.path.joinpath("mixed.yaml").write_text(
        crd_yaml("mixed.example.com", "Seed")
        + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"
    )
    pytester.makepyfile("def test_x(cluster):\n    pass\n")
    reports = pytester.inline_run("--ktest-crds=mixed.yaml", *existing_args)
    (error,) = setup_errors(reports)
    assert "mixed.yaml, document 2 (line" in error
    assert "ConfigMap settings (v1) is not a CustomResourceDefinition" in error


def test_crd_rejected_by_the_api_server(pytester: pytest.Pytester, existing_args: list[str]) -> None:
    pytester.path.joinpath("rejected.yaml").write_text(NON_STRUCTURAL_CRD)
    pytester.makepyfile("def test_x(cluster):\n    pass\n")
    reports = pytester.inline_run("--ktest-crds=rejected.yaml", *existing_args)
    (error,) = setup_errors(reports)
    assert "rejected.yaml, document 1 (line 1): the API server rejected CustomResourceDefinition " in error
    assert "loose.rejected.example.com" in error
    assert "must not be empty at the root" in error


def test_crd_whose_names_are_not_accepted(
    pytester: pytest.Pytester, existing_args: list[str], admin: Cluster
) -> None:
    group = "clash.example.com"
    pytester.path.joinpath("clash.yaml").write_text(
        crd_yaml(group, "Thing") + "---\n" + crd_yaml(group, "Thing", plural="others")
    )
    pytester.makepyfile("def test_x(cluster):\n    pass\n")
    try:
        reports = pytester.inline_run("--ktest-crds=clash.yaml", *existing_args)
        (error,) = setup_errors(reports)
        assert "clash.yaml, document 2 (line" in error
        assert "CustomResourceDefinition others.clash.example.com: names not accepted" in error
        assert "Thing" in error
    finally:
        remove_crds(admin, group)


def test_install_crds_from_plain_python(admin: Cluster, tmp_path: Path) -> None:
    group = "plain.example.com"
    path = tmp_path / "crd.yaml"
    path.write_text(crd_yaml(group, "Bolt"))
    try:
        assert admin.install_crds(path) == [f"bolts.{group}"]
        assert admin.discovery.served(f"{group}/v1", "Bolt")
    finally:
        remove_crds(admin, group)
