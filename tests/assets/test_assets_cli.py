"""`ktest binaries ...` end to end in a child process: clean stdout, clear errors, exit codes."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from assets_helpers import K8S_VERSION, write_fake_binaries  # type: ignore[import-not-found]

from ktest.assets import store
from ktest.assets.progress import Progress


@pytest.fixture
def cached(isolated: Path) -> Path:
    locations = store.Locations.from_env()
    with store.install_lock(locations, K8S_VERSION, Progress(enabled=False)) as installer:
        return installer.install("build", lambda s: (write_fake_binaries(s), {})[1]).directory


NO_GO = {"PATH": "/nonexistent-bin"}


def assert_one_clear_error(result, *fragments: str) -> None:
    assert result.returncode != 0
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.count("ktest: error:") == 1
    for fragment in fragments:
        assert fragment in result.stderr


def test_path_prints_only_the_directory(cached: Path, run_cli) -> None:
    result = run_cli("binaries", "path", "--k8s-version", K8S_VERSION)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{cached}\n"


def test_path_shell_prints_an_export_for_go_envtest(cached: Path, run_cli) -> None:
    result = run_cli("binaries", "path", "--shell", "--k8s-version", "1.37")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"export KUBEBUILDER_ASSETS={shlex.quote(str(cached))}\n"


def test_install_reports_version_origin_and_directory(cached: Path, run_cli) -> None:
    result = run_cli("binaries", "install", "--k8s-version", K8S_VERSION)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"Kubernetes {K8S_VERSION} (cache): {cached}\n"


def test_list_shows_installed_versions_with_sizes(cached: Path, run_cli) -> None:
    write_fake_binaries(
        store.Locations.from_env().envtest_entry("1.36.3"),
        version="1.36.3",
        names=("kube-apiserver", "etcd", "kubectl"),
    )
    result = run_cli("binaries", "list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["VERSION", "ORIGIN", "kube-apiserver"]
    first, second = lines[1].split(), lines[2].split()
    apiserver_size = (cached / "kube-apiserver").stat().st_size
    assert first[:4] == [K8S_VERSION, "cache/build", str(apiserver_size), "B"]
    assert first[-1] == str(cached)
    assert second[:2] == ["1.36.3", "setup-envtest"]
    assert "-" in second  # no kube-controller-manager in setup-envtest's entry


def test_list_on_an_empty_machine_says_how_to_install(isolated: Path, run_cli) -> None:
    result = run_cli("binaries", "list")
    assert result.returncode == 0
    assert "no binaries installed" in result.stdout and "ktest binaries install" in result.stdout


def test_unknown_version(cached: Path, run_cli) -> None:
    result = run_cli("binaries", "path", "--k8s-version", "1.99", env=NO_GO)
    assert_one_clear_error(result, "no known Kubernetes release matches 1.99", K8S_VERSION)


def test_malformed_selector(isolated: Path, run_cli) -> None:
    result = run_cli("binaries", "install", "--k8s-version", "1.37.x")
    assert_one_clear_error(result, "'1.37.x' is not valid", "latest")


@pytest.mark.parametrize("kind", ["file-in-the-way", "read-only-filesystem"])
def test_unwritable_cache_directory(isolated: Path, run_cli, kind: str) -> None:
    if kind == "file-in-the-way":
        cache_home = isolated / "cache-is-a-file"
        cache_home.write_text("")
    else:
        cache_home = Path("/sys/ktest-test-cache")  # sysfs refuses new directories, even to root
    result = run_cli(
        "binaries", "install", "--k8s-version", K8S_VERSION, env={"XDG_CACHE_HOME": str(cache_home)}
    )
    assert_one_clear_error(result, "is not writable", str(cache_home), "XDG_CACHE_HOME")


def test_ktest_assets_without_apiserver(isolated: Path, run_cli) -> None:
    directory = write_fake_binaries(isolated / "partial", names=("etcd", "kubectl"))
    result = run_cli("binaries", "path", env={"KTEST_ASSETS": str(directory)})
    assert_one_clear_error(result, f"KTEST_ASSETS={directory} has no executable kube-apiserver")


def test_go_missing_and_no_network(isolated: Path, run_cli) -> None:
    result = run_cli("binaries", "install", "--k8s-version", K8S_VERSION, env=NO_GO, timeout=30)
    assert_one_clear_error(
        result,
        "connection refused",
        "`go` is not on PATH",
        "point KTEST_ASSETS at",
        "allow the download",
        "install Go",
    )


def test_source_build_without_go_is_an_error(isolated: Path, run_cli) -> None:
    result = run_cli("binaries", "install", "--k8s-version", K8S_VERSION, "--source", "build",
                     env=NO_GO)
    assert_one_clear_error(result, "`go` is not on PATH")
    assert "- download:" not in result.stderr  # --source build never tries the download
    assert "connection refused" not in result.stderr


def test_usage_errors_exit_nonzero(isolated: Path, run_cli) -> None:
    result = run_cli("binaries", "install", "--source", "ftp")
    assert result.returncode == 2 and "invalid choice: 'ftp'" in result.stderr
    assert run_cli().returncode == 2
    assert run_cli("binaries").returncode == 2
