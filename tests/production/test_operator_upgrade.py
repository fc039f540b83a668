"""The operator's own upgrade (``ktest.operator_upgrade``): A to A changes nothing; a version B
that adds a Pod template label is caught as a rollout and as writes; a B that does not start is
one error with nothing left running."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktest.cluster import Cluster
from ktest.errors import OperatorError
from ktest.operator_upgrade import kopf_version, operator_upgrade

OPERATOR = Path(__file__).parent / "web_operator.py"
SOURCE = {
    "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shop", "labels": {"ktest.dev/web": "true"}}
}


def deployment_exists(cluster: Cluster, namespace: str):
    return lambda: cluster.get(("apps/v1", "Deployment", "shop", namespace))


def test_upgrading_a_version_to_itself_changes_nothing(cluster: Cluster, namespace: str) -> None:
    cluster.create(SOURCE, namespace=namespace)
    with operator_upgrade(cluster, before=OPERATOR, after=OPERATOR, namespaces=[namespace],
                          converged=deployment_exists(cluster, namespace)) as up:
        assert up.diff() == []
        up.assert_no_rollout()
        up.assert_quiet()
        assert up.operator is not None and up.operator.alive
    assert ("apps", "deployments", namespace, "shop") in {
        (key.group, key.resource, key.namespace, key.name) for key in up.state_before
    }


def test_a_pod_template_label_added_by_version_b_is_a_rollout(cluster: Cluster, namespace: str) -> None:
    cluster.create(SOURCE, namespace=namespace)
    v2 = kopf_version(OPERATOR, label="web-operator v2", memo={"pod_labels": {"version": "2"}})
    with operator_upgrade(cluster, before=OPERATOR, after=v2, namespaces=[namespace],
                          converged=deployment_exists(cluster, namespace)) as up:
        (change,) = up.diff()
        assert (change.key.describe(), change.change) == (f"deployments.apps {namespace}/shop", "changed")
        assert change.paths == ["spec.template.metadata.labels.version"]
        with pytest.raises(AssertionError) as rollout:
            up.assert_no_rollout()
        with pytest.raises(AssertionError) as noisy:
            up.assert_quiet()
        up.assert_quiet(allow=["deployments"])
    message = str(rollout.value)
    assert "rolls out 1 workload(s)" in message and f"deployments.apps {namespace}/shop" in message
    assert "spec.template.metadata.labels.version: added '2'" in message and "every Pod" in message
    assert f"patch deployments {namespace}/shop" in str(noisy.value)
    assert "spec.template.metadata.labels.version" in str(noisy.value)


def test_a_version_b_that_does_not_start_is_one_error_with_nothing_left(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    broken = tmp_path / "broken_operator.py"
    broken.write_text("raise RuntimeError('version 2 cannot start: missing setting')\n")
    cluster.create(SOURCE, namespace=namespace)
    upgrade = operator_upgrade(cluster, before=OPERATOR, after=broken, namespaces=[namespace],
                               converged=deployment_exists(cluster, namespace))
    with pytest.raises(OperatorError) as error:
        upgrade.__enter__()
    message = str(error.value)
    assert "version B (kopf" in message and "did not start" in message and "missing setting" in message
    assert "Version A was stopped" in message
    assert upgrade.operator is None  # nothing of B to stop
    assert upgrade.previous is not None and not upgrade.previous.alive
    assert upgrade.state_before  # A converged and was read before it stopped


def test_a_version_that_is_no_operator_is_refused(cluster: Cluster) -> None:
    with pytest.raises(OperatorError, match="after=42 is no operator version"):
        operator_upgrade(cluster, before=OPERATOR, after=42)  # type: ignore[arg-type]
