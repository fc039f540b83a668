"""Partial matching: subset semantics and readable field-path differences."""

from __future__ import annotations

import pytest

from ktest.errors import ManifestError
from ktest.wait import assert_matches, diff

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "shop",
        "labels": {"app": "web"},
        "annotations": {"example.com/owner": "team-a"},
    },
    "spec": {
        "replicas": 3,
        "paused": False,
        "template": {
            "spec": {
                "containers": [
                    {"name": "app", "image": "web:1.2", "ports": [{"containerPort": 8080}]},
                    {"name": "sidecar", "image": "proxy:3"},
                ]
            }
        },
    },
    "status": {
        "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "Starting"},
        ],
        "readyReplicas": 1,
    },
}


def test_a_subset_matches() -> None:
    assert diff(DEPLOYMENT, {"metadata": {"labels": {"app": "web"}}, "spec": {"replicas": 3}}) == []
    assert_matches(DEPLOYMENT, {"spec": {"template": {"spec": {"containers": [
        {"name": "app"}, {"image": "proxy:3"}]}}}})


def test_yaml_expected() -> None:
    assert_matches(DEPLOYMENT, """
        spec:
          replicas: 3
          paused: false
        metadata:
          annotations:
            example.com/owner: team-a
    """)


def test_value_difference_names_the_field_path() -> None:
    assert diff(DEPLOYMENT, {"spec": {"replicas": 5}}) == ["spec.replicas: expected 5, got 3"]


def test_keyed_list_item_difference() -> None:
    expected = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert diff(DEPLOYMENT, expected, list_keys={"conditions": "type"}) == [
        "status.conditions[type=Ready].status: expected 'True', got 'False'"
    ]


def test_keyed_lists_ignore_order_and_extra_items() -> None:
    expected = """
    status:
      conditions:
        - type: Ready
          reason: Starting
        - type: Available
          status: "True"
    """
    assert diff(DEPLOYMENT, expected, list_keys={"conditions": "type"}) == []


def test_keyed_list_missing_item_lists_the_keys_present() -> None:
    expected = {"status": {"conditions": [{"type": "Progressing", "status": "True"}]}}
    assert diff(DEPLOYMENT, expected, list_keys={"conditions": "type"}) == [
        "status.conditions[type=Progressing]: missing, no item has type='Progressing' "
        "(items have type: 'Available', 'Ready')"
    ]


def test_list_keys_by_dotted_path_or_function() -> None:
    expected = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "proxy:4"}]}}}}
    want = ["spec.template.spec.containers[name=sidecar].image: expected 'proxy:4', got 'proxy:3'"]
    assert diff(DEPLOYMENT, expected, list_keys={"spec.template.spec.containers": "name"}) == want
    assert diff(DEPLOYMENT, expected,
                list_keys=lambda path: "name" if path.endswith("containers") else None) == want


def test_lists_match_in_order_by_default_and_report_length() -> None:
    expected = {"spec": {"template": {"spec": {"containers": [{"name": "sidecar"}]}}}}
    assert diff(DEPLOYMENT, expected) == [
        "spec.template.spec.containers: expected 1 item, got 2",
        "spec.template.spec.containers[0].name: expected 'sidecar', got 'app'",
    ]


def test_nested_list_index_paths() -> None:
    expected = {"spec": {"template": {"spec": {"containers": [
        {"ports": [{"containerPort": 80}]}, {}]}}}}
    assert diff(DEPLOYMENT, expected) == [
        "spec.template.spec.containers[0].ports[0].containerPort: expected 80, got 8080"
    ]


def test_missing_keys_show_what_is_present() -> None:
    assert diff(DEPLOYMENT, {"spec": {"replica": 3}}) == [
        "spec.replica: missing, expected 3 (present: replicas, paused, template)"
    ]
    assert diff({"metadata": {}}, {"metadata": {"labels": {"a": "b"}}}) == [
        "metadata.labels: missing, expected {'a': 'b'}"
    ]


def test_keys_that_are_not_identifiers_are_quoted() -> None:
    assert diff(DEPLOYMENT, {"metadata": {"annotations": {"example.com/owner": "team-b"}}}) == [
        "metadata.annotations['example.com/owner']: expected 'team-b', got 'team-a'"
    ]


def test_type_mismatches() -> None:
    assert diff(DEPLOYMENT, {"spec": {"replicas": "3"}}) == [
        "spec.replicas: expected str '3', got int 3"
    ]
    assert diff(DEPLOYMENT, {"spec": {"paused": 0}}) == ["spec.paused: expected int 0, got bool False"]
    assert diff(DEPLOYMENT, {"metadata": {"name": {"first": "web"}}}) == [
        "metadata.name: expected a mapping, got str 'web'"
    ]
    assert diff(DEPLOYMENT, {"spec": {"replicas": [3]}}) == [
        "spec.replicas: expected a list of 1 item, got int 3"
    ]


def test_numbers_compare_by_value_but_bools_are_not_numbers() -> None:
    assert diff({"a": 1}, {"a": 1.0}) == []
    assert diff({"a": True}, {"a": 1}) == ["a: expected int 1, got bool True"]


def test_null_matches_missing_or_null_only() -> None:
    assert diff({"metadata": {}}, {"metadata": {"deletionTimestamp": None}}) == []
    assert diff({"metadata": {"deletionTimestamp": None}}, {"metadata": {"deletionTimestamp": None}}) == []
    assert diff({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}},
                {"metadata": {"deletionTimestamp": None}}) == [
        "metadata.deletionTimestamp: expected null, got '2024-01-01T00:00:00Z'"
    ]


def test_assert_matches_message_names_the_object_and_counts_differences() -> None:
    expected = {"spec": {"replicas": 5}, "status": {"readyReplicas": 3}}
    with pytest.raises(AssertionError) as info:
        assert_matches(DEPLOYMENT, expected)
    assert str(info.value) == (
        "Deployment shop/web does not match the expected fields (2 differences):\n"
        "  spec.replicas: expected 5, got 3\n"
        "  status.readyReplicas: expected 3, got 1"
    )


def test_client_objects_with_to_dict_are_accepted() -> None:
    class Instance:
        def to_dict(self) -> dict[str, object]:
            return DEPLOYMENT

    assert_matches(Instance(), {"kind": "Deployment"})
    assert diff(Instance(), {"kind": "Pod"}) == ["kind: expected 'Pod', got 'Deployment'"]


def test_invalid_yaml_is_a_manifest_error_with_the_line() -> None:
    with pytest.raises(ManifestError, match="not valid YAML at line 3"):
        diff(DEPLOYMENT, "spec:\n  replicas: 3\n bad: [\n")
    with pytest.raises(ManifestError, match="must be a YAML mapping"):
        diff(DEPLOYMENT, "- a\n- b\n")


def test_keyed_expected_item_without_the_key_is_an_error() -> None:
    with pytest.raises(ManifestError, match="has no 'type' field"):
        diff(DEPLOYMENT, {"status": {"conditions": [{"status": "True"}]}},
             list_keys={"conditions": "type"})
