"""The offline builders are a distribution of their own (offline/, ``ktest-offline``), reached
only through the core's plug-in points: the core never imports them, and without them a machine
that cannot download is told how to get them.

"Without them" is real: the child processes run this venv's interpreter on a view of its
site-packages that leaves ktest-offline's distribution out, so its entry points and package do
not exist there (nothing is patched inside ktest)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

import pytest

import ktest

KTEST_SOURCE = Path(ktest.__file__).resolve().parent
OFFLINE_INSTALL_HINT = "pip install ktest-offline (from ktest's repository: pip install -e ./offline)"
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: connection refused, as on a machine without internet


@pytest.fixture(scope="module")
def site_without_offline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This venv's site-packages as symbolic links, less ktest-offline's files."""
    return site_view(tmp_path_factory.mktemp("site-packages-without-ktest-offline"))


def site_view(view: Path) -> Path:
    """``view`` filled with links to this venv's site-packages, less ktest-offline's files."""
    site_packages = Path(sysconfig.get_paths()["purelib"])
    left_out = []
    for entry in site_packages.iterdir():
        if "ktest_offline" in entry.name:
            left_out.append(entry.name)
            continue
        (view / entry.name).symlink_to(entry)
    assert left_out, f"ktest-offline is not installed in {site_packages}: `make venv` installs ./offline"
    return view


def ktest_without_offline(
    site: Path, *args: str, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """``python -m ktest ARGS`` with ``site`` as the only site-packages (``-S``, then added)."""
    program = (
        "import runpy, site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv[0] = 'ktest'; "
        "runpy.run_module('ktest', run_name='__main__', alter_sys=True)"
    )
    return subprocess.run(
        [sys.executable, "-S", "-c", program, str(site), *args],
        capture_output=True, text=True, env=dict(env), timeout=120, check=False,
    )


def offline_machine(tmp_path: Path) -> dict[str, str]:
    """An environment with nothing installed and no way to download (refused connections)."""
    env = {
        key: value for key, value in os.environ.items()
        if not key.startswith("KTEST_") and key not in ("KUBEBUILDER_ASSETS",)
    }
    return {
        **env,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "KTEST_ENVTEST_INDEX_URL": f"{UNREACHABLE}/envtest-releases.yaml",
        "KTEST_K8S_RELEASE_URL": UNREACHABLE,
        "KTEST_DOWNLOAD_CONNECT_TIMEOUT": "2",
    }


def test_the_core_names_no_offline_module() -> None:
    naming = [
        f"{path.relative_to(KTEST_SOURCE.parent)}:{number}"
        for path in sorted(KTEST_SOURCE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "ktest_offline" in line
    ]
    assert naming == [], "the core reaches the offline builders through entry points only"


def test_importing_every_core_module_imports_no_offline_module() -> None:
    program = (
        "import importlib, pkgutil, sys, ktest\n"
        "for module in pkgutil.walk_packages(ktest.__path__, 'ktest.'):\n"
        "    if module.name != 'ktest.__main__':\n"
        "        importlib.import_module(module.name)\n"
        "print(sorted(name for name in sys.modules if name.startswith('ktest_offline')))\n"
    )
    finished = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                              timeout=120, check=False)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.strip() == "[]"


def test_binaries_install_without_offline_names_it_when_nothing_can_be_downloaded(
    site_without_offline: Path, tmp_path: Path
) -> None:
    finished = ktest_without_offline(
        site_without_offline, "binaries", "install", "--k8s-version", "1.37.2", env=offline_machine(tmp_path)
    )
    assert finished.returncode != 0, finished.stdout
    assert "could not get control-plane binaries for Kubernetes 1.37.2" in finished.stderr
    tried = f"build from Go modules: ktest-offline is not installed ({OFFLINE_INSTALL_HINT})"
    assert tried in finished.stderr
    assert f"3. build them from Go modules: {OFFLINE_INSTALL_HINT}" in finished.stderr
    installed = tmp_path / "cache" / "ktest" / "k8s" / "1.37.2-linux-amd64"
    assert not installed.exists(), "nothing half-installed"


def test_binaries_install_with_offline_offers_the_go_build(tmp_path: Path) -> None:
    """The same machine with ktest-offline installed but no `go`: the build is the way out named."""
    env = offline_machine(tmp_path)
    env["PATH"] = str(Path(sys.executable).parent)  # this venv's tools, no go
    finished = subprocess.run(
        [sys.executable, "-m", "ktest", "binaries", "install", "--k8s-version", "1.37.2"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )
    assert finished.returncode != 0, finished.stdout
    assert "build from Go modules: `go` is not on PATH" in finished.stderr
    assert "ktest-offline is not installed" not in finished.stderr
    assert "3. install Go (https://go.dev/dl/)" in finished.stderr


def test_build_image_without_offline_names_it(site_without_offline: Path, tmp_path: Path) -> None:
    """A version whose node image the engine does not hold (make test builds 1.37.2's: an image that
    is there and usable is used without the builders,
    tests/kind_machinery/test_kind_images_without_builders.py)."""
    finished = ktest_without_offline(
        site_without_offline, "kind", "build-image", "--k8s-version", "1.36.1", env=offline_machine(tmp_path)
    )
    assert finished.returncode != 0, finished.stdout
    assert "needs a node-image source, and none is installed" in finished.stderr
    assert "the kind backend runs kindest/node:v1.36.1" in finished.stderr
    assert OFFLINE_INSTALL_HINT in finished.stderr


def test_a_binary_source_that_fails_to_load_is_named(tmp_path: Path) -> None:
    """A distribution whose ``ktest.binary_sources`` entry point names a missing module: the
    error names the entry point and its distribution, not a silent 'nothing registered'."""
    site = tmp_path / "site"
    site.mkdir()
    site_view(site)
    dist_info = site / "broken_source-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-source\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[ktest.binary_sources]\nbroken = no_such_module:Source\n")
    finished = ktest_without_offline(
        site, "binaries", "install", "--k8s-version", "1.37.2", env=offline_machine(tmp_path)
    )
    assert finished.returncode != 0, finished.stdout
    assert (
        "the ktest.binary_sources entry point broken = no_such_module:Source failed to load: "
        "ModuleNotFoundError: No module named 'no_such_module'" in finished.stderr
    )
    assert "Reinstall the distribution that provides it (broken-source), or uninstall it" in finished.stderr
    assert "Traceback" not in finished.stderr
