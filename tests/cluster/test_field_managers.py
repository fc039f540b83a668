"""Every write the test makes is attributed to the field manager ``ktest``, so managedFields
tell the test's writes from the operator's; ``as_field_manager`` writes under another name."""

from __future__ import annotations

from typing import Any

from builders import configmap

from ktest.cluster import FIELD_MANAGER, Cluster


def managers(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields") or [])


def test_every_kind_of_write_is_attributed_to_ktest(admin: Cluster, ns: str) -> None:
    assert FIELD_MANAGER == "ktest"
    created = admin.create(configmap("created", ns, {"a": "1"}))
    assert managers(created) == [("ktest", "Update")]  # before: the client's user agent
    patched = admin.patch(created, {"data": {"b": "2"}})
    assert managers(patched) == [("ktest", "Update")]
    updated = admin.update({**patched, "data": {"c": "3"}})
    assert managers(updated) == [("ktest", "Update")]
    applied = admin.apply(configmap("applied", ns, {"a": "1"}))
    assert managers(applied) == [("ktest", "Apply")]


def test_as_field_manager_writes_under_another_name(admin: Cluster, ns: str) -> None:
    created = admin.create(configmap("shared", ns, {"a": "1"}))
    operator = admin.as_field_manager("my-operator")
    assert operator is admin.as_field_manager("my-operator")  # one per name, closed with admin
    assert admin.as_field_manager("ktest") is admin
    patched = operator.patch(created, {"data": {"b": "2"}})
    assert managers(patched) == [("ktest", "Update"), ("my-operator", "Update")]
    assert operator.namespace_reaper() is admin.namespace_reaper()
