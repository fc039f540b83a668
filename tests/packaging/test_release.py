"""Releasable: what the release workflow checks refuses a wrong tag or changelog, the sdist's own
tests run from the unpacked sdist, and the workflow publishes only checked files by trusted
publishing.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from packaging_helpers import CHECK_DIST, ROOT, copy_tree

import ktest

# A representative part of the suite, real control plane included, run from the unpacked sdist.
SDIST_TESTS = ("tests/test_public_api.py", "tests/cluster/test_field_managers.py")


def _check_dist(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK_DIST), "--source", str(tree),
                           "--outdir", str(tree / "dist"), *args],
                          capture_output=True, text=True, timeout=600, check=False)


def test_check_dist_refuses_a_tag_that_is_not_the_version(tmp_path: Path) -> None:
    result = _check_dist(copy_tree(tmp_path), "--tag", "v9.9.9")
    assert result.returncode == 1
    assert (f"the tag v9.9.9 does not name ktest's version {ktest.__version__} (ktest/public_api.py): "
            f"tag v{ktest.__version__}") in result.stderr
    assert not (tmp_path / "dist").exists(), "nothing is built for a wrong tag"


@pytest.mark.parametrize(("heading", "problem"), [
    ("## [{v}]", "CHANGELOG.md's section for {v} is not dated: write `## [{v}] - YYYY-MM-DD`"),
    ("## [{v}.dev0] - 2026-01-01", "CHANGELOG.md has no section for {v}: add `## [{v}] - YYYY-MM-DD`"),
])
def test_check_dist_refuses_a_changelog_without_a_dated_section(tmp_path: Path, heading: str,
                                                                problem: str) -> None:
    tree = copy_tree(tmp_path)
    changelog = tree / "CHANGELOG.md"
    version = ktest.__version__
    text = changelog.read_text()
    dated = next(line for line in text.splitlines() if line.startswith(f"## [{version}] - "))
    changelog.write_text(text.replace(dated, heading.format(v=version)))
    result = _check_dist(tree)
    assert result.returncode == 1
    assert problem.format(v=version) in result.stderr


def test_the_sdist_tests_run_from_the_unpacked_sdist(dist: Path, tmp_path: Path) -> None:
    """A packager's `pytest` in the unpacked sdist imports the sdist's ktest, and its tests pass."""
    (sdist,) = dist.glob("ktest-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    unpacked = tmp_path / f"ktest-{ktest.__version__}"
    probe = subprocess.run([sys.executable, "-c", "import ktest; print(ktest.__file__)"], cwd=unpacked,
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == str(unpacked / "ktest" / "__init__.py")
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *SDIST_TESTS],
                            cwd=unpacked, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " skipped" not in result.stdout, result.stdout[-1000:]


def _workflow(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())


def test_release_workflow_publishes_the_checked_files_by_trusted_publishing() -> None:
    workflow = _workflow("release.yml")
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML reads the key `on` as True
    assert workflow["permissions"] == {"contents": "read"}
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    build_run = "\n".join(step.get("run", "") for step in build["steps"])
    assert 'scripts/ci/check-dist --tag "$RELEASE_TAG" --outdir dist' in build_run
    uses = [step.get("uses", "") for step in build["steps"] + publish["steps"]]
    assert any(use.startswith("actions/attest-build-provenance@") for use in uses)
    assert all(len(use.split("@")[1].split()[0]) == 40 for use in uses if use), "actions pinned by commit"
    assert publish["needs"] == "build"
    assert publish["environment"]["name"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["steps"][-1]["uses"].startswith("pypa/gh-action-pypi-publish@")
    assert "with" not in publish["steps"][-1], "no token or password: trusted publishing"


def test_dependabot_and_issue_templates() -> None:
    dependabot = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    ecosystems = {update["package-ecosystem"] for update in dependabot["updates"]}
    assert ecosystems == {"github-actions", "pip"}
    templates = ROOT / ".github" / "ISSUE_TEMPLATE"
    for name in ("bug_report.yml", "feature_request.yml"):
        form = yaml.safe_load((templates / name).read_text())
        assert form["name"] and form["body"], name
    for name in ("CONTRIBUTING.md", "SECURITY.md"):
        assert (ROOT / name).stat().st_size > 500, name
    assert "make demo" in (ROOT / "CONTRIBUTING.md").read_text()
