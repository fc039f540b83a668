"""The failed tests' timelines on GitHub: the reusable workflow and what ``ktest init
github-actions`` writes upload ``.ktest-artifacts/timelines/`` on failure and name each page in
the job summary. The summary steps run here for real (bash, the CI script) on real pages."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from ci_helpers import REPO, VENV_BIN, run_ci_script

from ktest.cli import init
from ktest.timeline import TimelineData, write_page

TIMELINES = ".ktest-artifacts/timelines"
UPLOAD = "actions/upload-artifact@330a01c490aca151604b8cf639adc76d48f6c5d4"


def timeline_page(directory: Path, test: str, *, truncated: bool = False) -> Path:
    """A page as the plugin writes it (ktest.timeline's own writer), for ``test``."""
    data = TimelineData(test=test, started_wall=time.time(), duration=1.0, outcome="failed",
                        failure=(0.9, "AssertionError: boom"),
                        truncated=(0.5, "the test was interrupted") if truncated else None)
    name = test.replace("/", "_").replace("::", "__") + ".html"
    return write_page(data, directory / name)


def steps_by_name(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["name"]: step for step in job["steps"] if "name" in step}


def run_step(step: dict[str, Any], cwd: Path, env: dict[str, str]) -> str:
    """Run a workflow step's ``run`` with bash as the runner would; the job summary it wrote."""
    summary = cwd / "summary.md"
    summary.touch()
    completed = subprocess.run(
        ["bash", "-e", "-c", step["run"]], cwd=cwd, capture_output=True, text=True, check=False,
        env={"PATH": f"{VENV_BIN}:/usr/bin:/bin", **env, "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert completed.returncode == 0, completed.stderr
    return summary.read_text()


def check_upload_steps(job: dict[str, Any], artifact: str) -> tuple[dict[str, Any], dict[str, Any]]:
    steps = steps_by_name(job)
    upload = steps["Upload the timelines of failed tests"]
    assert upload["if"] == "failure()"
    assert upload["uses"].startswith(UPLOAD)
    assert upload["with"] == {"name": artifact, "path": f"{TIMELINES}/", "if-no-files-found": "ignore"}
    summary = steps["Name the timelines in the job summary"]
    assert summary["if"] == "failure()"
    assert summary["env"] == {
        "ARTIFACT": artifact, "ARTIFACT_URL": "${{ steps.timelines.outputs.artifact-url }}"
    }
    assert upload["id"] == "timelines"
    names = [step.get("name") for step in job["steps"]]
    assert names.index("pytest") < names.index(upload["name"]) < names.index(summary["name"])
    return upload, summary


def test_the_reusable_workflow_uploads_the_timelines_and_names_them_in_the_summary(tmp_path: Path) -> None:
    job = yaml.safe_load((REPO / ".github/workflows/ktest.yml").read_text())["jobs"]["test"]
    _, summary = check_upload_steps(job, "timelines-${{ matrix.artifact }}")
    assert not "timelines-${{ matrix.artifact }}".startswith("ktest-")  # the report job downloads ktest-*

    (tmp_path / ".ktest-ci").symlink_to(REPO)
    timeline_page(tmp_path / TIMELINES, "tests/test_shop.py::test_converges")
    text = run_step(summary, tmp_path, {"ARTIFACT": "timelines-1.37-bare", "ARTIFACT_URL": "https://x/a/1"})

    assert "### Failure timelines (1)" in text
    assert "[timelines-1.37-bare](https://x/a/1)" in text
    assert "- tests/test_shop.py::test_converges: `tests_test_shop.py__test_converges.html`" in text


def test_the_summary_lists_every_page_with_its_test_and_says_which_were_cut(tmp_path: Path) -> None:
    directory = tmp_path / "timelines"
    timeline_page(directory, "tests/a.py::test_one")
    timeline_page(directory / "gw1", "tests/b.py::test_two[x]", truncated=True)
    (directory / "stray.html").write_text("<html>not a timeline</html>")

    result = run_ci_script("timelines.py", "--dir", str(directory), "--artifact", "timelines-x", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "### Failure timelines (3)"
    assert "in the artifact `timelines-x`" in result.stdout
    assert "- tests/a.py::test_one: `tests_a.py__test_one.html`" in lines
    assert ("- tests/b.py::test_two[x]: `gw1/tests_b.py__test_two[x].html` "
            "(the recording stops at 0.5 s: the test was interrupted)") in lines
    assert ("- stray: `stray.html` (no embedded timeline data (not a ktest timeline, or cut while "
            "written))") in lines


def test_no_timelines_print_nothing_and_a_file_for_the_directory_is_an_error(tmp_path: Path) -> None:
    absent = run_ci_script("timelines.py", "--dir", str(tmp_path / "none"), "--artifact", "t", cwd=tmp_path)
    assert (absent.returncode, absent.stdout) == (0, "")

    (tmp_path / "file").write_text("")
    wrong = run_ci_script("timelines.py", "--dir", str(tmp_path / "file"), "--artifact", "t", cwd=tmp_path)
    assert wrong.returncode == 2
    assert f"{tmp_path / 'file'} is not a directory: pass the timelines directory" in wrong.stderr


@pytest.mark.parametrize("backends", [("bare",), ("bare", "kind")])
def test_the_self_contained_workflow_uploads_the_timelines_and_names_them(
    tmp_path: Path, backends: tuple[str, ...]
) -> None:
    """What ``ktest init github-actions`` writes when ktest came from PyPI (no reusable workflow)."""
    options = init.WorkflowOptions("", "", k8s_versions=("1.37",), backends=backends, ktest_version="1.0.0")
    job = yaml.safe_load(init.render_standalone_workflow(options))["jobs"]["ktest"]
    user_repo = tmp_path
    _, summary = check_upload_steps(job, "timelines-${{ matrix.backend }}-${{ matrix.k8s-version }}")

    env = {"ARTIFACT": "timelines-bare-1.37", "ARTIFACT_URL": "https://x/a/2"}
    assert run_step(summary, user_repo, env) == "", "a run without timelines writes no summary"
    timeline_page(user_repo / TIMELINES, "tests/test_a.py::test_one")
    timeline_page(user_repo / TIMELINES / "gw0", "tests/test_b.py::test_two")
    text = run_step(summary, user_repo, env)

    assert text.startswith("### Failure timelines\n")
    assert "[timelines-bare-1.37](https://x/a/2)" in text
    assert text.endswith("- `gw0/tests_test_b.py__test_two.html`\n- `tests_test_a.py__test_one.html`\n")
