"""The timeline of a test the session's ``cluster`` fixture does not serve, in an inner session on
real control planes: a test on a plane of its own (``control_plane_upgrade``) that upgrades it
mid-test and whose plane stops in its teardown."""

from __future__ import annotations

from typing import Any

import pytest
from test_timeline_plugin import page_data

OWN_PLANE = """
def configmap(name):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def test_fails_after_the_upgrade(control_plane_upgrade):
    cluster = control_plane_upgrade.cluster
    with cluster.namespace(prefix="own") as ns:
        cluster.create(configmap("before"), namespace=ns)
        control_plane_upgrade.upgrade()
        cluster.create(configmap("after"), namespace=ns)
        assert False, "on purpose, after the upgrade"
"""


def only(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [event for event in events if event["kind"] == kind]
    assert len(found) == 1, f"expected one {kind} event, got {found}"
    return found[0]


def test_a_test_on_a_plane_of_its_own_gets_a_page_with_its_upgrade_and_what_came_after(
    pytester: pytest.Pytester, inner_env: dict[str, str]
) -> None:
    pytester.makepyfile(test_inner=OWN_PLANE)
    artifacts = pytester.path / "artifacts"
    result = pytester.runpytest_subprocess(f"--ktest-artifacts={artifacts}")
    result.assert_outcomes(failed=1)
    page = artifacts / "timelines" / "test_inner.py_test_fails_after_the_upgrade.html"
    assert page.is_file(), f"no page for the test on its own plane:\n{result.stdout.str()[-3000:]}"
    data = page_data(page)
    assert data["outcome"] == "failed" and "on purpose, after the upgrade" in data["failure"]["message"]
    # the upgrade, as wide as it took, where the reader looks for the control plane
    upgrade = only(data["events"], "upgrade")
    assert upgrade["lane"] == "controllers"
    assert upgrade["detail"]["from"].startswith("1.36.") and upgrade["detail"]["to"].startswith("1.37.")
    assert upgrade["label"].startswith("control plane upgrade 1.36.")
    assert upgrade["detail"]["until"] > upgrade["t"]
    # the API server's view: a gap that says why, no recording cut short, the writes after it
    gaps = [event for event in data["events"] if event["kind"] == "gap"]
    assert gaps and all(gap["lane"] == "apiserver" for gap in gaps)
    assert any("the control plane was being upgraded (1.36." in gap["label"] for gap in gaps), gaps
    assert data["truncated"] is None, data["truncated"]
    seen: dict[str, dict[str, Any]] = {}  # each object's first event
    for event in data["events"]:
        if event["lane"] == "apiserver" and event["kind"] == "watch-event":
            seen.setdefault(event["detail"]["object"], event)
    after = [name for name in seen if name.startswith("configmaps ") and name.endswith("/after")]
    assert after, f"the write after the upgrade is not in the API server's view: {sorted(seen)}"
    assert seen[after[0]]["detail"]["type"] in ("ADDED", "RELISTED")
    assert seen[after[0]]["t"] >= upgrade["detail"]["until"] - 0.5
    requests = [e for e in data["events"] if e["kind"] == "request" and e["t"] > upgrade["detail"]["until"]]
    assert any(e["detail"]["method"] == "POST" for e in requests), "the test's requests after the upgrade"
