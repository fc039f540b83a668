"""``ktest versions``: supported/default minors without network, resolved patches, bad selectors,
and per minor what is installed here, the node images and how the rest would be obtained.

The machine's state is real: an isolated cache (XDG directories under tmp_path), ``go`` on PATH or
not, downloads on or off, a Docker engine address that answers or not."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from ktest import backend_registry as registry
from ktest.assets.store import host_arch
from ktest.backends.kind import recipe
from ktest.cli.main import main
from ktest.extension import BackendSpec, BackendVersions


def test_json_lists_supported_default_and_backends(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["versions", "--json", "--k8s-version", "1.36.3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["supported"] == ["1.37", "1.36", "1.35", "1.34", "1.33", "1.32"]
    assert report["default"] == recipe.DEFAULT_MINOR == "1.37"
    assert report["older"] == "1.36"
    assert report["backends"] == ["bare", "kind"]
    assert report["kind_version"] == recipe.KIND_VERSION
    assert report["resolved"] == {"1.36.3": "1.36.3"}


def test_every_supported_minor_gets_a_resolved_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["versions", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report["resolved"]) == report["supported"]
    for minor, patch in report["resolved"].items():
        assert patch is None or patch.startswith(minor + ".")


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("1.20", "Kubernetes version '1.20' is not supported by ktest: supported minors are"),
        ("banana", "Kubernetes version selector 'banana' is not valid"),
    ],
)
def test_bad_selectors_exit_2_naming_what_is_supported(
    capsys: pytest.CaptureFixture[str], selector: str, message: str
) -> None:
    assert main(["versions", "--k8s-version", selector]) == 2
    assert message in capsys.readouterr().err


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Empty cache and setup-envtest store, no user binaries, no reachable Docker engine."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for variable in ("KTEST_ASSETS", "KUBEBUILDER_ASSETS", "KTEST_CACHE_DIR", "KTEST_DOWNLOAD"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    return tmp_path


def rows(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict[str, Any]]:
    assert main(["versions", "--json", *args]) == 0
    return {row["minor"]: row for row in json.loads(capsys.readouterr().out)["minors"]}


def test_every_supported_minor_has_a_row_with_the_etcd_its_kubeadm_runs(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = rows(capsys)
    assert list(table) == ["1.37", "1.36", "1.35", "1.34", "1.33", "1.32"]
    assert {minor: row["etcd"] for minor, row in table.items()} == {
        "1.37": "3.7.0", "1.36": "3.6.8", "1.35": "3.6.6", "1.34": "3.6.5", "1.33": "3.5.24", "1.32": "3.5.24"
    }
    assert [row["role"] for row in table.values()] == ["default", "older", "", "", "", ""]
    assert all(row["supported"] for row in table.values())


def test_without_a_docker_engine_node_images_are_unknown_not_absent(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = rows(capsys, "--k8s-version", "1.34")["1.34"]
    assert row["node_images"] is None
    assert row["node_images_note"] == "unknown (no Docker engine)"
    assert main(["versions", "--k8s-version", "1.34"]) == 0
    assert "  kind node image: unknown (no Docker engine)\n" in capsys.readouterr().out


def test_installed_binaries_are_shown_under_their_minor(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = isolated / "data" / "kubebuilder-envtest" / "k8s" / f"1.33.13-linux-{host_arch()}"
    store.mkdir(parents=True)
    for name in ("kube-apiserver", "etcd"):
        (store / name).write_text("#!/bin/sh\n")
        (store / name).chmod(0o755)
    table = rows(capsys)
    assert table["1.33"]["installed"] == ["1.33.13"]
    assert table["1.33"]["patch"] == "1.33.13"
    assert table["1.33"]["obtain"] == "installed"
    assert table["1.33"]["obtain_detail"] == "installed here: 1.33.13"
    assert table["1.32"]["installed"] == [] and table["1.32"]["obtain"] != "installed"


def test_with_downloads_off_a_missing_minor_is_go_built_with_the_etcd_its_kubeadm_runs(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KTEST_DOWNLOAD", "0")
    row = rows(capsys, "--k8s-version", "1.32")["1.32"]
    assert row["obtain"] == "build"
    assert "k8s.io/kubernetes v1.32.x and etcd 3.5.24" in row["obtain_detail"]


def test_without_downloads_or_go_it_says_the_minor_cannot_be_had_here_and_why(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KTEST_DOWNLOAD", "0")
    monkeypatch.setenv("PATH", str(isolated / "empty-bin"))
    row = rows(capsys, "--k8s-version", "1.33")["1.33"]
    assert row["obtain"] == "none"
    assert row["obtain_detail"].startswith("not obtainable here: downloads are off (KTEST_DOWNLOAD); ")
    assert "`go` is not on PATH" in row["obtain_detail"]


def test_a_go_older_than_the_minor_needs_is_named(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """1.32's go.mod says go 1.23.0: a Go 1.22 that may not fetch a newer toolchain cannot build it."""
    bin_dir = isolated / "old-go"
    bin_dir.mkdir()
    # What `go env GOVERSION GOTOOLCHAIN` prints.
    (bin_dir / "go").write_text("#!/bin/sh\necho go1.22.9\necho local\n")
    (bin_dir / "go").chmod(0o755)
    monkeypatch.setenv("KTEST_DOWNLOAD", "0")
    monkeypatch.setenv("PATH", str(bin_dir))
    table = rows(capsys, "--k8s-version", "1.32", "--k8s-version", "1.37")
    assert table["1.32"]["obtain"] == "none"
    too_old = "go1.22.9 is older than the Go 1.23.0 1.32's go.mod needs (GOTOOLCHAIN=local)"
    assert too_old in table["1.32"]["obtain_detail"]
    assert "older than the Go 1.26.0 1.37's go.mod needs" in table["1.37"]["obtain_detail"]


def test_with_resolve_an_unreachable_envtest_index_is_named(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], closed_port: int
) -> None:
    monkeypatch.setenv("KTEST_ENVTEST_INDEX_URL", f"http://127.0.0.1:{closed_port}/envtest-releases.yaml")
    monkeypatch.setenv("PATH", str(isolated / "empty-bin"))
    row = rows(capsys, "--resolve", "--k8s-version", "1.34")["1.34"]
    assert row["obtain"] == "none"
    assert "the envtest index is unreachable (" in row["obtain_detail"]
    assert f"127.0.0.1:{closed_port}" in row["obtain_detail"]


@dataclass(frozen=True)
class HeldImages:
    """Another backend's node images on this machine: one for 1.36."""

    unknown: str = ""

    def for_minor(self, minor: str) -> list[str]:
        return [f"example.com/mine-node:v{minor}.1"] if minor == "1.36" else []


def mine_versions() -> BackendVersions:
    return BackendVersions("minectl", "v9.9.9", HeldImages(), "minectl build-image {minor}")


def open_mine(settings: Any, notes: list[str]) -> NoReturn:
    raise AssertionError("ktest versions opens no backend")


def test_each_backends_versions_part_is_its_part_of_the_report(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What ``ktest versions`` says of a backend (its tool's version, its node images per minor)
    comes from the backend's ``versions`` part, kind's and another package's alike."""
    mine = BackendSpec(
        "mine", "a test backend", open=f"{__name__}:open_mine", versions=f"{__name__}:mine_versions"
    )
    built_in = registry.backends()
    monkeypatch.setattr(registry, "backends", lambda: {**built_in, "mine": mine})
    assert main(["versions", "--k8s-version", "1.36", "--k8s-version", "1.35"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("ktest ")
    assert f"; kind backend uses kind {recipe.KIND_VERSION}; mine backend uses minectl v9.9.9\n" in text
    assert (
        "  kind node image: unknown (no Docker engine)\n"
        "  mine node image: example.com/mine-node:v1.36.1\n"
    ) in text
    assert "  mine node image: none (`minectl build-image 1.35`)\n" in text
    assert main(["versions", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["kind_version"], report["mine_version"]) == (recipe.KIND_VERSION, "v9.9.9")
    assert report["minors"][1]["node_images_note"] == "unknown (no Docker engine)"
