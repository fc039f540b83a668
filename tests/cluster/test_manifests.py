"""Manifest loading: every source shape, and errors that point at the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktest.cluster import ObjectRef, as_ref, load_manifests
from ktest.cluster.namespaces import dns_label, unique_name
from ktest.errors import ManifestError

CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}


def test_dict_is_copied_not_mutated() -> None:
    [obj] = load_manifests(CONFIGMAP, namespace="ns1")
    assert obj["metadata"]["namespace"] == "ns1"
    assert "namespace" not in CONFIGMAP["metadata"]


def test_multi_document_yaml_string_skips_empty_documents() -> None:
    text = (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n"
        "apiVersion: v1\nkind: Secret\nmetadata: {name: b}\n"
    )
    assert [o["kind"] for o in load_manifests(text)] == ["ConfigMap", "Secret"]


def test_list_objects_are_expanded() -> None:
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [CONFIGMAP, {**CONFIGMAP, "metadata": {"name": "b"}}],
    }
    assert [o["metadata"]["name"] for o in load_manifests(listing)] == ["a", "b"]


def test_directory_is_searched_recursively_in_order_skipping_kustomization(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
    (tmp_path / "sub" / "c.json").write_text(
        '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}'
    )
    (tmp_path / "a.yml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    (tmp_path / "kustomization.yaml").write_text("resources: [a.yml]\n")
    (tmp_path / "notes.txt").write_text("not a manifest")
    assert [o["metadata"]["name"] for o in load_manifests(tmp_path)] == ["a", "b", "c"]
    assert [o["metadata"]["name"] for o in load_manifests(str(tmp_path / "b.yaml"))] == ["b"]


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n")
    with pytest.raises(ManifestError, match=r"bad\.yaml: line \d+, column \d+: not valid YAML"):
        load_manifests(bad)


def test_document_without_kind_names_document_and_line(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n"
    )
    with pytest.raises(
        ManifestError, match=r"two\.yaml, document 2 \(line 5\): not a Kubernetes object: missing kind"
    ):
        load_manifests(path)


def test_scalar_document_is_rejected() -> None:
    with pytest.raises(ManifestError, match=r"expected a Kubernetes object.*got a str"):
        load_manifests("just a string\n")


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"no such file or directory"):
        load_manifests(tmp_path / "absent.yaml")


def test_refs_from_dicts_tuples_and_refs() -> None:
    ref = as_ref(CONFIGMAP, namespace="ns")
    assert ref == ObjectRef("v1", "ConfigMap", "a", "ns")
    assert as_ref(("v1", "ConfigMap", "a", "ns")) == ref
    assert as_ref(ref) is ref
    assert str(ref) == "ConfigMap ns/a (v1)"
    with pytest.raises(ManifestError, match=r"missing 'metadata'"):
        as_ref({"apiVersion": "v1", "kind": "ConfigMap"})


@pytest.mark.parametrize(
    "text",
    ["tests/test_x.py::TestY::test_Finalizer[param-1]", "9lives", "---", "a" * 200, "UPPER_case.name"],
)
def test_dns_labels_are_valid(text: str) -> None:
    label = dns_label(text, suffix="abc123")
    assert len(label) <= 63
    assert label.endswith("-abc123")
    assert label[0].isalpha() and label.replace("-", "").isalnum() and label == label.lower()


def test_unique_names_differ() -> None:
    assert unique_name("same") != unique_name("same")
