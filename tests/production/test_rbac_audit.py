"""RBAC both ways (``ktest.rbac_audit``): the rules a real operator's requests needed, derived from
what its proxy recorded, against roles written by hand: the minimal Role matches exactly, a Role
without ``patch`` on ``deployments/status`` misses it (naming the request), a wildcard and an unused
rule are listed; ``ktest rbac report`` prints and judges the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from web_roles import MINIMAL, SEEDED

from ktest.cli.main import main
from ktest.cluster import Cluster
from ktest.errors import ManifestError
from ktest.operators import run_kopf
from ktest.rbac_audit import RbacAuditError, compare_rules, derived_roles, shipped_rules
from ktest.rbac_audit.needs import RequestRecord
from ktest.rbac_audit.session import SessionRecorder
from ktest.wait import eventually

OPERATOR = Path(__file__).parent / "web_operator.py"
@pytest.fixture(scope="module")
def recorded(cluster: Cluster) -> Iterator[tuple[RequestRecord, str]]:
    """The web operator's requests while it reconciles one ConfigMap and reports on its Deployment."""
    recorder = SessionRecorder()
    recorder.test = "test_rbac_audit.py::recorded"
    with cluster.namespace(prefix="rbac-audit", background=True) as namespace:
        source = {"name": "shop", "labels": {"ktest.dev/web": "true"}}
        cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": source}, namespace=namespace)
        deployment = ("apps/v1", "Deployment", "shop", namespace)
        with run_kopf(OPERATOR, cluster, namespaces=[namespace], memo={"report_status": True}):
            eventually(lambda: cluster.get(deployment)["status"]["conditions"])
            # kopf starts watching namespaces after listing them, and under load its handlers can be
            # done before that watch is sent (a CI run stopped the recording in between)
            eventually(lambda: any(need.resource == "namespaces" and need.verb == "watch"
                                   for need in recorder.record.needs()))
        recorder.stop()
        yield recorder.record, namespace


def _rules(text: str) -> dict[str, list[dict]]:
    return {doc["kind"]: doc["rules"] for doc in yaml.safe_load_all(text)}


def test_the_derived_rules_equal_a_hand_written_minimal_role(recorded, tmp_path: Path) -> None:
    record, _ = recorded
    derived = {role["kind"]: role["rules"] for role in derived_roles(record.needs())}
    assert derived == _rules(MINIMAL)
    (tmp_path / "role.yaml").write_text(MINIMAL)
    comparison = compare_rules(record.needs(), shipped_rules(tmp_path / "role.yaml"))
    assert (comparison.missing, comparison.unused, comparison.wildcards) == ([], [], [])
    assert comparison.describe() == "the shipped roles grant exactly what the operator's requests needed"


def test_a_missing_rule_names_the_request_and_wildcard_and_unused_rules_are_listed(
    recorded, tmp_path: Path
) -> None:
    record, namespace = recorded
    (tmp_path / "role.yaml").write_text(SEEDED)
    comparison = compare_rules(record.needs(), shipped_rules(tmp_path / "role.yaml"))
    assert not comparison.ok
    text = comparison.describe()
    assert "1 missing RBAC rule(s)" in text
    assert (
        "missing: patch deployments/status (API group 'apps') in a namespace; needed by patch deployments "
        f"{namespace}/shop (status), by operator 'web_operator' in test_rbac_audit.py::recorded"
    ) in text
    assert 'add the rule {apiGroups: ["apps"], resources: ["deployments/status"], verbs: ["patch"]}' in text
    assert "wildcard rule: ClusterRole web-operator" in text and "rule 1 (line 5)" in text
    assert "unused rule: ClusterRole web-operator" in text
    assert "no request used delete deployments (apps)" in text


def test_ktest_rbac_report_merges_files_and_judges_roles(
    recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record, _ = recorded
    first = record.write(tmp_path / "shard1" / "requests.json")
    second = RequestRecord().write(tmp_path / "shard2" / "requests.json")
    (tmp_path / "minimal.yaml").write_text(MINIMAL)
    (tmp_path / "seeded.yaml").write_text(SEEDED)
    assert main(["rbac", "report", str(first), str(second)]) == 0
    assert _rules(capsys.readouterr().out) == _rules(MINIMAL)
    assert main(["rbac", "report", str(first), str(second), "--against", str(tmp_path / "minimal.yaml")]) == 0
    assert main(["rbac", "report", str(first), "--against", str(tmp_path / "seeded.yaml")]) == 1
    assert "missing: patch deployments/status" in capsys.readouterr().err
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"needs": []}')
    assert main(["rbac", "report", str(damaged)]) == 2
    assert f"{damaged}: not an RBAC request record" in capsys.readouterr().err
    with pytest.raises(RbacAuditError, match=r"requests\.json"):
        RequestRecord.read(damaged)


def test_a_roles_file_that_does_not_parse_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    broken = tmp_path / "role.yaml"
    broken.write_text("apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nrules: [\n  - {verbs: get\n")
    with pytest.raises(ManifestError, match=r"role\.yaml.*line \d+.*not valid YAML"):
        shipped_rules(broken)
