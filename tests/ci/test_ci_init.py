"""``ktest init github-actions`` and the workflow linters on what we ship and what it writes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ci_helpers import REPO, tool

from ktest.cli import init
from ktest.cli.main import main

SHA = "0123456789abcdef0123456789abcdef01234567"
ARGS = ["init", "github-actions", "--repository", "example/ktest", "--ref", SHA]


def lint(directory: Path) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """actionlint and zizmor (offline) on a repository directory."""
    actionlint = subprocess.run(
        [tool("actionlint")], cwd=directory, capture_output=True, text=True, check=False
    )
    zizmor = subprocess.run(
        [tool("zizmor"), "--offline", "--quiet", ".github/"],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )
    return actionlint, zizmor


@pytest.fixture
def user_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_writes_a_pinned_call_of_the_reusable_workflow(user_repo: Path) -> None:
    assert main([*ARGS, "--k8s-versions", "1.37,1.36", "--backends", "bare,kind", "--shards", "2"]) == 0
    text = (user_repo / ".github/workflows/ktest.yml").read_text()
    assert f"uses: example/ktest/.github/workflows/ktest.yml@{SHA}  # ktest " in text
    assert 'k8s-versions: \'["1.37", "1.36"]\'' in text
    assert 'backends: \'["bare", "kind"]\'' in text
    assert "shards: 2" in text
    assert "permissions:\n  contents: read" in text
    assert len([line for line in text.splitlines() if not line.startswith("#")]) <= 20


def test_refuses_to_overwrite_without_force(user_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = user_repo / ".github/workflows/ktest.yml"
    path.parent.mkdir(parents=True)
    path.write_text("# mine\n")
    assert main(ARGS) == 2
    assert "already exists; not overwriting it" in capsys.readouterr().err
    assert path.read_text() == "# mine\n"
    assert main([*ARGS, "--force"]) == 0
    assert path.read_text().startswith("# Kubernetes integration tests with ktest")
    assert not list(path.parent.glob("*.partial"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ref", "v0.1.0"], "--ref 'v0.1.0' is not a commit SHA"),
        (["--repository", "ktest"], "--repository 'ktest' is not OWNER/NAME"),
        (["--k8s-versions", "1.37,banana"], "--k8s-versions: 'banana' is not a Kubernetes version"),
        (["--backends", "docker"], "--backends: 'docker' is not one of bare, kind"),
        (["--shards", "0"], "--shards must be between 1 and 32"),
    ],
)
def test_bad_options_are_named_and_nothing_is_written(
    user_repo: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main([*ARGS, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (user_repo / ".github").exists()


def test_with_only_a_repository_it_asks_for_the_ref(
    user_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init, "installed_origin", lambda: (None, None))
    assert main(["init", "github-actions", "--repository", "example/ktest"]) == 2
    assert "Pass --ref <40-hex commit SHA> too" in capsys.readouterr().err
    assert not (user_repo / ".github").exists()


def test_after_pip_install_it_writes_a_self_contained_workflow(
    user_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ktest from PyPI has no direct_url.json (no repository, no commit): no --repository/--ref
    needed, the workflow installs the same release from PyPI."""
    import ktest

    monkeypatch.setattr(init, "installed_origin", lambda: (None, None))
    assert main(["init", "github-actions", "--backends", "bare,kind", "--k8s-versions", "1.37,default",
                 "--pytest-args", "tests/integration -x"]) == 0
    assert "self-contained: ktest" in capsys.readouterr().out
    text = (user_repo / ".github/workflows/ktest.yml").read_text()
    assert f"python -m pip install 'ktest[kind]=={ktest.__version__}'" in text
    assert 'k8s-version: ["1.37", "latest"]' in text and 'backend: ["bare", "kind"]' in text
    assert "KTEST_K8S_VERSION: ${{ matrix.k8s-version }}" in text
    assert "KTEST_BACKEND: ${{ matrix.backend }}" in text
    assert 'echo "KUBEBUILDER_ASSETS=$assets" >> "$GITHUB_ENV"' in text
    assert "path: .ktest-artifacts/kind-logs/" in text and "if: failure() && matrix.backend == 'kind'" in text
    assert "run: 'python -m pytest tests/integration -x'" in text
    assert init.CANCEL_UNLESS_DEFAULT_BRANCH in text
    actionlint, zizmor = lint(user_repo)
    assert actionlint.returncode == 0, actionlint.stdout + actionlint.stderr
    assert zizmor.returncode == 0, zizmor.stdout + zizmor.stderr


def test_concurrency_never_cancels_runs_on_the_default_branch(user_repo: Path) -> None:
    assert main(ARGS) == 0
    text = (user_repo / ".github/workflows/ktest.yml").read_text()
    assert (
        "  cancel-in-progress: ${{ github.ref != format('refs/heads/{0}', "
        "github.event.repository.default_branch) }}"
    ) in text


def test_github_urls_are_understood() -> None:
    for url in (
        "https://github.com/acme/ktest",
        "git+https://github.com/acme/ktest.git",
        "git@github.com:acme/ktest.git",
    ):
        assert init._github_repository(url) == "acme/ktest"
    assert init._github_repository("https://gitlab.com/acme/ktest") is None


def test_the_generated_workflow_passes_actionlint_and_zizmor(user_repo: Path) -> None:
    assert (
        main(
            [
                *ARGS,
                "--backends",
                "bare,kind",
                "--shards",
                "3",
                "--pytest-args",
                "tests/e2e -x",
                "--install",
                "pip install -e '.[test]'",
            ]
        )
        == 0
    )
    actionlint, zizmor = lint(user_repo)
    assert actionlint.returncode == 0, actionlint.stdout + actionlint.stderr
    assert zizmor.returncode == 0, zizmor.stdout + zizmor.stderr


def test_the_linters_do_catch_a_tag_pin_and_a_broken_expression(user_repo: Path) -> None:
    """The check above can fail: the same file pinned by tag, or with a typo, is reported."""
    assert main(ARGS) == 0
    path = user_repo / ".github/workflows/ktest.yml"
    text = path.read_text()
    path.write_text(text.replace(f"@{SHA}", "@v0.1.0"))
    _, zizmor = lint(user_repo)
    assert zizmor.returncode != 0 and "unpinned-uses" in zizmor.stdout + zizmor.stderr
    path.write_text(text.replace("${{ github.ref }}", "${{ github.reff }}"))
    actionlint, _ = lint(user_repo)
    assert actionlint.returncode != 0 and 'property "reff" is not defined' in actionlint.stdout


def test_what_we_ship_passes_actionlint_and_zizmor() -> None:
    actionlint, zizmor = lint(REPO)
    assert actionlint.returncode == 0, actionlint.stdout + actionlint.stderr
    assert zizmor.returncode == 0, zizmor.stdout + zizmor.stderr


def test_the_default_versions_are_the_two_newest_supported(user_repo: Path) -> None:
    from ktest.cli.versions import supported_minors

    assert main(ARGS) == 0
    newest = supported_minors()[:2]
    expected = "k8s-versions: '[" + ", ".join(f'"{v}"' for v in newest) + "]'"
    assert expected in (user_repo / ".github/workflows/ktest.yml").read_text()
