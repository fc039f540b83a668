"""The YAML and the scripts agree: what GitHub would only show at run time, checked statically.

actionlint checks expressions and local `uses:` it can open; it cannot open the action through
the reusable workflow's ktest checkout (`./.ktest-ci/...`) nor the remote workflow that `ktest
init` writes a call of. These tests cover those joints.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matrix
import pytest
import yaml
from ci_helpers import REPO, SCRIPTS

from ktest.cli import init

ACTION = REPO / ".github/actions/setup-ktest/action.yml"
REUSABLE = REPO / ".github/workflows/ktest.yml"
OWN = REPO / ".github/workflows/test.yml"


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def run_texts(steps: list[dict[str, Any]]) -> list[str]:
    return [str(step.get("run", "")) for step in steps]


def test_every_script_the_yaml_runs_exists() -> None:
    texts = run_texts(load(ACTION)["runs"]["steps"])
    for job in load(REUSABLE)["jobs"].values():
        texts += run_texts(job.get("steps", []))
    named = set()
    for text in texts:
        named |= set(
            re.findall(r"(?:\$SCRIPTS|\$KTEST_SOURCE/scripts/ci|\.ktest-ci/scripts/ci)/([\w.-]+)", text)
        )
    assert named >= {"resolve.py", "binary_cache.py", "node_image.py", "matrix.py", "run-pytest", "report"}
    for name in named:
        assert (SCRIPTS / name).is_file(), name


def test_the_action_uses_only_outputs_its_scripts_write() -> None:
    action = ACTION.read_text()
    used = set(re.findall(r"steps\.resolve\.outputs\.([\w-]+)", action))
    written = set(re.findall(r'"([\w-]+)": ', (SCRIPTS / "resolve.py").read_text().split("set_outputs({")[1]))
    assert used and used <= written, used - written
    assert set(re.findall(r"steps\.binaries-check\.outputs\.([\w-]+)", action)) == {"usable"}


def test_the_reusable_workflow_passes_only_inputs_the_action_declares() -> None:
    declared = set(load(ACTION)["inputs"])
    test_steps = load(REUSABLE)["jobs"]["test"]["steps"]
    setup = next(step for step in test_steps if str(step.get("uses", "")).endswith("setup-ktest"))
    assert set(setup["with"]) <= declared


def test_matrix_entries_have_every_key_the_workflow_reads() -> None:
    expressions = " ".join(re.findall(r"\$\{\{(.*?)\}\}", REUSABLE.read_text()))
    read = set(re.findall(r"(?<![\w.-])matrix\.([\w-]+)", expressions))
    assert {"k8s-version", "backend", "shard", "shards"} <= read
    entry = matrix.build_matrix(["1.37"], ["kind"], 2, {"default": "1.37", "supported": ["1.37"]})[0]
    assert read <= set(entry), read - set(entry)


@pytest.mark.parametrize("backends", ["bare", "bare,kind"])
def test_what_ktest_init_writes_matches_the_reusable_workflows_inputs(backends: str) -> None:
    text = init.render_workflow(
        init.WorkflowOptions(
            repository="acme/ktest",
            ref="0" * 40,
            k8s_versions=("1.37",),
            backends=tuple(backends.split(",")),
            shards=3,
            install="pip install -e .[test]",
            pytest_args="tests",
        )
    )
    passed = set(load_text(text)["jobs"]["ktest"]["with"])
    assert passed <= set(load(REUSABLE)["on"]["workflow_call"]["inputs"])


def load_text(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    return {("on" if key is True else key): value for key, value in data.items()}


def test_own_workflow_is_built_on_the_shipped_pieces() -> None:
    own = load(OWN)
    uses = [step.get("uses", "") for job in own["jobs"].values() for step in job.get("steps", [])]
    assert "./.github/actions/setup-ktest" in uses
    assert any(job.get("uses") == "./.github/workflows/ktest.yml" for job in own["jobs"].values())
    assert own["permissions"] == {"contents": "read"}
    assert own["concurrency"]["cancel-in-progress"] == init.CANCEL_UNLESS_DEFAULT_BRANCH
    step_jobs = [job for job in own["jobs"].values() if "steps" in job]
    assert step_jobs and all("timeout-minutes" in job for job in step_jobs)


def test_third_party_actions_are_pinned_by_commit_with_the_tag_in_a_comment() -> None:
    for path in (ACTION, REUSABLE, OWN):
        lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
        # Every `uses:` but the local ones (./...), however written: none escapes the check.
        third_party = [line for line in lines if re.search(r"\buses:\s*(?![\s'\"]*\./)\S", line)]
        assert third_party, f"{path.name}: no third-party action found; is this still the workflow?"
        for line in third_party:
            found = re.search(r"uses: ([\w-]+/[\w./-]+)@(\S+)(.*)", line)
            assert found is not None, f"{path.name}: a third-party action without @<commit>: {line}"
            assert re.fullmatch(r"[0-9a-f]{40}", found.group(2)), line
            assert re.match(r"\s+# v\d+\.\d+\.\d+$", found.group(3)), line


def test_the_action_leaves_python_and_go_to_the_caller_when_asked() -> None:
    action = load(ACTION)
    inputs = action["inputs"]
    assert inputs["setup-python"]["default"] == "true" and inputs["setup-go"]["default"] == "true"
    assert inputs["go-cache"]["default"] == "true" and "go-version-file" in inputs
    steps = {str(step.get("uses", "")).split("@")[0]: step for step in action["runs"]["steps"]}
    assert steps["actions/setup-python"]["if"] == "inputs.setup-python == 'true'"
    setup_go = steps["actions/setup-go"]
    assert setup_go["if"] == "inputs.setup-go == 'true'"
    assert setup_go["with"]["go-version-file"] == "${{ inputs.go-version-file }}"
    assert setup_go["with"]["cache"] == "${{ inputs.go-cache == 'true' }}"


def test_the_action_exports_the_settings_for_later_steps() -> None:
    (export,) = [step for step in load(ACTION)["runs"]["steps"] if "GITHUB_ENV" in str(step.get("run", ""))]
    for variable in ("KTEST_K8S_VERSION", "KTEST_BACKEND", "KUBEBUILDER_ASSETS"):
        assert f'echo "{variable}=' in export["run"]
    assert export["env"]["K8S_VERSION"] == "${{ steps.resolve.outputs.k8s-version }}"


def test_the_reusable_workflow_takes_a_runner_and_keeps_kind_logs_of_failures() -> None:
    workflow = load(REUSABLE)
    inputs = workflow["on"]["workflow_call"]["inputs"]
    assert inputs["runs-on"]["default"] == "ubuntu-latest"
    test = workflow["jobs"]["test"]
    assert test["runs-on"] == "${{ inputs.runs-on }}"
    (upload,) = [step for step in test["steps"] if ".ktest-artifacts/kind-logs" in str(step.get("with", {}))]
    assert upload["if"] == "failure() && matrix.backend == 'kind'"
    assert not upload["with"]["name"].startswith("ktest-")  # the report job downloads ktest-*
    setup = next(step for step in test["steps"] if step.get("id") == "ktest")
    assert setup["with"]["go-version-file"] == "${{ inputs.go-version-file }}"


CURRENT_MAJORS = {"actions/checkout": 5, "actions/setup-python": 6, "actions/setup-go": 6, "actions/cache": 4,
                  "actions/upload-artifact": 5, "actions/download-artifact": 6}


def test_github_actions_are_at_their_current_majors() -> None:
    texts = [path.read_text() for path in (ACTION, REUSABLE, OWN)]
    texts.append(init.render_standalone_workflow(init.WorkflowOptions(
        "", "", ("1.37",), ("bare", "kind"), ktest_version="0.1.0")))
    seen = set()
    for text in texts:
        pin = r"uses: (actions/[\w-]+)(?:/[\w-]+)?@[0-9a-f]{40} # v(\d+)"
        unread = [line.strip() for line in text.splitlines()
                  if re.search(r"uses:\s*['\"]?actions/", line) and not re.search(pin, line)]
        assert not unread, f"actions/ steps not pinned as `@<sha> # vN`, so their major is unknown: {unread}"
        pinned = re.findall(pin, text)
        for action, tag in pinned:
            assert int(tag) >= CURRENT_MAJORS[action], (action, tag)
            seen.add(action)
    assert seen == set(CURRENT_MAJORS), f"never checked: {set(CURRENT_MAJORS) - seen}"
