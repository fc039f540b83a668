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
    assert own["concurrency"]["cancel-in-progress"] is True
    assert all("timeout-minutes" in job for job in own["jobs"].values() if "steps" in job)


def test_third_party_actions_are_pinned_by_commit_with_the_tag_in_a_comment() -> None:
    for path in (ACTION, REUSABLE, OWN):
        for line in path.read_text().splitlines():
            if line.lstrip().startswith("#"):
                continue
            found = re.search(r"uses: ([\w-]+/[\w./-]+)@(\S+)(.*)", line)
            if found is None:
                continue
            assert re.fullmatch(r"[0-9a-f]{40}", found.group(2)), line
            assert re.match(r"\s+# v\d+\.\d+\.\d+$", found.group(3)), line
