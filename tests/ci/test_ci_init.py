"""``ktest init github-actions`` and the workflow linters on what we ship and what it writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
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
        (["--k8s-versions", "1.37,1.20"], "--k8s-versions: Kubernetes 1.20 is not supported by this ktest: "
                                          "the supported minors are 1.37, 1.36, 1.35, 1.34, 1.33, 1.32 "
                                          "(`ktest versions` lists "
                                          "them); give one of those (e.g. 1.37)"),
        (["--k8s-versions", "1.20.4"], "--k8s-versions: Kubernetes 1.20.4 is not supported by this ktest"),
        (["--python-version", "three"], "--python-version 'three' is not a Python version like 3.12"),
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
    needed, the workflow installs the same release from PyPI, the kind extra only in kind cells;
    it caches the binaries by exact release (restoring the same release cached by another ktest)
    and the node image, and runs once per change (push, and pull requests from forks)."""
    import ktest
    from ktest.backends.kind.recipe import KIND_VERSION

    monkeypatch.setattr(init, "installed_origin", lambda: (None, None))
    assert main(["init", "github-actions", "--backends", "bare,kind", "--k8s-versions", "1.37,default",
                 "--pytest-args", "tests/integration -x", "--python-version", "3.12"]) == 0
    assert "self-contained: ktest" in capsys.readouterr().out
    text = (user_repo / ".github/workflows/ktest.yml").read_text()
    workflow = yaml.safe_load(text)
    job = workflow["jobs"]["ktest"]
    assert job["if"] == (
        "github.event_name == 'push' || github.event.pull_request.head.repo.full_name != github.repository"
    )
    assert job["strategy"]["matrix"] == {"k8s-version": ["1.37", "latest"], "backend": ["bare", "kind"]}
    assert job["env"] == {"KTEST_BACKEND": "${{ matrix.backend }}"}
    steps = {step.get("name") or step["uses"].split("@")[0] + f"#{number}": step
             for number, step in enumerate(job["steps"])}
    assert job["steps"][1]["with"] == {"python-version": "3.12"}
    install = steps["Install ktest (the kind extra in kind cells) and the project under test"]["run"]
    assert install.startswith(
        'if [ "$KTEST_BACKEND" = kind ]; then\n'
        f"  python -m pip install 'ktest[kind]=={ktest.__version__}'\n"
        "else\n"
        f"  python -m pip install ktest=={ktest.__version__}\n"
        "fi\n"
    )
    caches = [step for step in job["steps"] if step.get("uses", "").startswith("actions/cache@")]
    binaries, node_image = caches
    release = "${{ steps.k8s.outputs.version }}"
    platform = "${{ runner.os }}-${{ runner.arch }}"
    assert binaries["with"]["key"] == (
        f"ktest-binaries-{platform}-k8s{release}-${{{{ matrix.backend }}}}-ktest{ktest.__version__}"
    )
    cell = f"ktest-binaries-{platform}-k8s{release}-${{{{ matrix.backend }}}}-"
    assert binaries["with"]["restore-keys"] == f"{cell}\n"
    assert node_image["if"] == "matrix.backend == 'kind'"
    assert node_image["with"] == {"path": "~/.cache/ktest-ci/node-image.tar",
                                  "key": f"ktest-kind-node-{platform}-kind{KIND_VERSION}-k8s{release}"}
    assert 'image="kindest/node:v$KTEST_K8S_VERSION"' in text
    assert 'echo "KUBEBUILDER_ASSETS=$assets" >> "$GITHUB_ENV"' in text
    assert "path: .ktest-artifacts/kind-logs/" in text and "if: failure() && matrix.backend == 'kind'" in text
    assert "run: 'python -m pytest tests/integration -x'" in text
    assert init.CANCEL_UNLESS_DEFAULT_BRANCH in text
    actionlint, zizmor = lint(user_repo)
    assert actionlint.returncode == 0, actionlint.stdout + actionlint.stderr
    assert zizmor.returncode == 0, zizmor.stdout + zizmor.stderr


def test_a_bare_only_workflow_never_installs_the_kind_extra(
    user_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init, "installed_origin", lambda: (None, None))
    assert main(["init", "github-actions"]) == 0
    text = (user_repo / ".github/workflows/ktest.yml").read_text()
    assert "[kind]" not in text and "kindest/node" not in text and "ktest kind install" not in text
    assert "python -m pip install ktest==" in text


def test_the_version_step_resolves_the_exact_release(user_repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """The self-contained workflow's own shell step, run here as the runner runs it (bash, with its
    env, $RUNNER_TEMP, $GITHUB_OUTPUT and $GITHUB_ENV) against the ktest installed here."""
    import os

    monkeypatch.setattr(init, "installed_origin", lambda: (None, None))
    assert main(["init", "github-actions", "--k8s-versions", "1.37.2"]) == 0
    workflow = yaml.safe_load((user_repo / ".github/workflows/ktest.yml").read_text())
    step = next(s for s in workflow["jobs"]["ktest"]["steps"] if s.get("id") == "k8s")
    output, env_file, runner_temp = tmp_path / "output", tmp_path / "env", tmp_path / "runner-temp"
    runner_temp.mkdir()
    environment = {
        **os.environ,
        **{name: value.replace("${{ matrix.k8s-version }}", "1.37.2") for name, value in step["env"].items()},
        "GITHUB_OUTPUT": str(output), "GITHUB_ENV": str(env_file), "RUNNER_TEMP": str(runner_temp),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(["bash", "-e", "-c", step["run"]], env=environment, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert output.read_text() == "version=1.37.2\n"
    assert env_file.read_text() == "KTEST_K8S_VERSION=1.37.2\n"


def test_help_describes_the_pypi_fallback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "github-actions", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "When neither is known and neither option is given (ktest installed from PyPI, or a checkout " \
           "without a GitHub 'origin'), it writes a self-contained workflow instead" in text
    assert "installs this ktest release from PyPI (the kind extra only in kind cells)" in text
    assert "--python-version 3.X the Python of the test jobs" in text


def git_checkout(directory: Path, origin: str | None) -> str:
    """A git checkout of ktest with one commit (and ``origin``, if given); its HEAD commit."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True,
                              check=True).stdout.strip()

    directory.mkdir()
    git("init", "--quiet")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "--allow-empty",
        "-m", "x")
    if origin is not None:
        git("remote", "add", "origin", origin)
    return git("rev-parse", "HEAD")


@pytest.mark.parametrize("origin", [None, "https://gitlab.example.com/acme/ktest.git"],
                         ids=["no-origin", "origin-elsewhere"])
def test_a_checkout_without_a_github_origin_writes_the_self_contained_workflow_with_a_note(
    user_repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    origin: str | None,
) -> None:
    """ktest installed from a git checkout (pip install -e) whose origin is not on GitHub: its
    commit is known but no repository to pin, and the user passed neither option."""
    checkout = tmp_path / "ktest-checkout"
    git_checkout(checkout, origin)
    assert init._git_checkout_origin(checkout)[0] is None  # what pip's direct_url.json leads to
    monkeypatch.setattr(init, "installed_origin", lambda: init._git_checkout_origin(checkout))
    assert main(["init", "github-actions"]) == 0
    out = capsys.readouterr().out
    assert "self-contained: ktest" in out
    assert ("note: this ktest is a git checkout without a GitHub 'origin' remote, so ktest's reusable "
            "workflow cannot be pinned") in out
    assert "For the reusable one, pass --repository OWNER/ktest --ref <commit SHA>" in out
    assert "python -m pip install ktest==" in (user_repo / ".github/workflows/ktest.yml").read_text()


def test_a_checkout_with_a_github_origin_pins_the_reusable_workflow(
    user_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = tmp_path / "ktest-checkout"
    commit = git_checkout(checkout, "git@github.com:acme/ktest.git")
    monkeypatch.setattr(init, "installed_origin", lambda: init._git_checkout_origin(checkout))
    assert main(["init", "github-actions", "--python-version", "3.13"]) == 0
    text = (user_repo / ".github/workflows/ktest.yml").read_text()
    assert f"uses: acme/ktest/.github/workflows/ktest.yml@{commit}  # ktest " in text
    assert "python-version: '3.13'" in text
    assert f"if: {init.ONCE_PER_CHANGE}" in text


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
    from ktest.assets.minors import supported_minors

    assert main(ARGS) == 0
    newest = supported_minors()[:2]
    expected = "k8s-versions: '[" + ", ".join(f'"{v}"' for v in newest) + "]'"
    assert expected in (user_repo / ".github/workflows/ktest.yml").read_text()


def test_supported_spans_every_minor_from_1_32_in_both_kinds_of_workflow(
    user_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reusable workflow expands "supported" from `ktest versions --json` (scripts/ci/matrix.py);
    the self-contained one lists the minors itself."""
    import matrix

    every = ["1.37", "1.36", "1.35", "1.34", "1.33", "1.32"]
    assert main([*ARGS, "--k8s-versions", "supported"]) == 0
    workflow = yaml.safe_load((user_repo / ".github/workflows/ktest.yml").read_text())
    assert workflow["jobs"]["ktest"]["with"]["k8s-versions"] == '["supported"]'
    capsys.readouterr()
    assert main(["versions", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    cells = matrix.build_matrix(["supported"], ["bare"], 1, report)
    assert [cell["k8s-version"] for cell in cells] == every
    monkeypatch.setattr(init, "installed_origin", lambda: (None, None))
    assert main(["init", "github-actions", "--force", "--k8s-versions", "supported"]) == 0
    standalone = yaml.safe_load((user_repo / ".github/workflows/ktest.yml").read_text())
    assert standalone["jobs"]["ktest"]["strategy"]["matrix"]["k8s-version"] == every
