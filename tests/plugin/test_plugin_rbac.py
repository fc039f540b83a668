"""``ktest_rbac``: a child session's operator requests, merged across xdist workers, judged against
the shipped roles; the rules derived with ``-n 2`` equal those of a serial run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

WEB_OPERATOR = Path(__file__).parents[1] / "production" / "web_operator.py"
CHILD_TESTS = """
from pathlib import Path

import pytest
from ktest.operators import run_kopf
from ktest.wait import eventually

OPERATOR = Path(__file__).parent / "web_operator.py"


@pytest.mark.parametrize("report", [False, True, False, True])
def test_web(cluster, namespace, report):
    source = {"name": "shop", "labels": {"ktest.dev/web": "true"}}
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": source}, namespace=namespace)
    deployment = ("apps/v1", "Deployment", "shop", namespace)
    with run_kopf(OPERATOR, cluster, namespaces=[namespace], memo={"report_status": report}):
        ready = (lambda: cluster.get(deployment)["status"]["conditions"]) if report else None
        eventually(ready or (lambda: cluster.get(deployment)))
"""


def _roles() -> tuple[str, str]:
    import web_roles  # tests/production's hand-written roles (the project fixture puts it on the path)

    return web_roles.MINIMAL, web_roles.SEEDED


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.syspath_prepend(str(WEB_OPERATOR.parent))
    minimal, seeded = _roles()
    shutil.copy(WEB_OPERATOR, pytester.path / "web_operator.py")
    (pytester.path / "minimal.yaml").write_text(minimal)
    (pytester.path / "seeded.yaml").write_text(seeded)
    pytester.makeini("[pytest]\nktest_rbac = minimal.yaml\n")
    pytester.makepyfile(test_web=CHILD_TESTS)
    return pytester


def _derived(pytester: pytest.Pytester) -> str:
    return (pytester.path / ".ktest-artifacts" / "rbac" / "derived-rules.yaml").read_text()


def test_rules_derived_by_two_workers_equal_a_serial_run_and_the_minimal_role(
    project: pytest.Pytester, existing_args: list[str]
) -> None:
    serial = project.runpytest_inprocess("-p", "no:randomly", "-p", "no:xdist", *existing_args)
    serial.assert_outcomes(passed=4)
    assert serial.ret == 0
    serial.stdout.fnmatch_lines(["*ktest rbac*", "*the shipped roles grant exactly what the operator's*"])
    alone = _derived(project)
    minimal, _ = _roles()
    assert {doc["kind"]: doc["rules"] for doc in yaml.safe_load_all(alone)} == {
        doc["kind"]: doc["rules"] for doc in yaml.safe_load_all(minimal)
    }
    shutil.rmtree(project.path / ".ktest-artifacts" / "rbac")
    parallel = project.runpytest_subprocess("-p", "no:randomly", "-n", "2", *existing_args, timeout=300)
    parallel.assert_outcomes(passed=4)
    assert parallel.ret == 0
    parts = project.path / ".ktest-artifacts" / "rbac" / "parts"
    assert sorted(path.name for path in parts.glob("*.json")) == ["gw0.json", "gw1.json", "main.json"]
    assert _derived(project) == alone


def test_a_missing_rule_fails_the_session_naming_the_request(
    project: pytest.Pytester, existing_args: list[str]
) -> None:
    result = project.runpytest_inprocess(
        "-p", "no:randomly", "-p", "no:xdist", "--ktest-rbac=seeded.yaml", *existing_args
    )
    result.assert_outcomes(passed=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*ktest rbac: FAILED*",
        "*1 missing RBAC rule(s)*",
        "*missing: patch deployments/status (API group 'apps') in a namespace; needed by patch deployments "
        "*/shop (status) (+1 more like it), by operator 'web_operator' in test_web.py::test_web[[]True*",
    ])
    rule = '{apiGroups: ["apps"], resources: ["deployments/status"], verbs: ["patch"]}'
    assert f"add the rule {rule}" in result.stdout.str()
    result.stdout.fnmatch_lines(["*wildcard rule: ClusterRole web-operator*rule 1 (line 5)*"])
    assert (
        "grants '*'; the requests needed only: "
        '{apiGroups: [""], resources: [configmaps, namespaces], verbs: [list, watch]}; '
        "{apiGroups: [apiextensions.k8s.io], resources: [customresourcedefinitions], verbs: [list, watch]}"
    ) in result.stdout.str()
    result.stdout.fnmatch_lines(["*unused rule: ClusterRole web-operator*delete deployments (apps)*"])


def test_a_roles_file_that_does_not_parse_stops_the_run_naming_file_and_line(
    project: pytest.Pytester, existing_args: list[str]
) -> None:
    (project.path / "broken.yaml").write_text("kind: Role\nrules: [\n  - {verbs: get\n")
    result = project.runpytest_inprocess("--ktest-rbac=broken.yaml", *existing_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ktest: option --ktest-rbac: *broken.yaml*line *not valid YAML*"])
    assert "passed" not in result.stdout.str()
