"""The distributions a user installs: sdist and wheel build, their metadata passes
``twine check --strict``, and they carry what PyPI and type checkers need.

Built from a copy of the source tree (the build writes ``*.egg-info``), with
build isolation: setuptools comes from PyPI, as on any builder's machine.
"""

from __future__ import annotations

import email
import email.policy
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from packaging_helpers import ROOT

import ktest


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("ktest-*.whl")
    return wheel


def _metadata(dist: Path) -> email.message.EmailMessage:
    with zipfile.ZipFile(_wheel(dist)) as archive:
        text = archive.read(f"ktest-{ktest.__version__}.dist-info/METADATA").decode()
    return email.message_from_string(text, policy=email.policy.default)  # type: ignore[return-value]


def test_twine_check_passes(dist: Path) -> None:
    files = sorted(str(path) for path in dist.glob("ktest-*"))
    assert len(files) == 2, files  # one sdist, one wheel (beside them: check-dist's RELEASABLE stamp)
    result = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_metadata_licence_classifiers_and_version(dist: Path) -> None:
    metadata = _metadata(dist)
    assert metadata["Version"] == ktest.__version__
    assert metadata["License-Expression"] == "Apache-2.0"  # SPDX, not the deprecated table
    assert metadata["License-File"] == "LICENSE"
    classifiers = metadata.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert "Framework :: Pytest" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # forbidden beside an expression
    extras = metadata.get_all("Provides-Extra") or []
    assert {"kopf", "kind", "xdist"} <= set(extras)
    assert 'pytest-xdist>=3.5; extra == "xdist"' in (metadata.get_all("Requires-Dist") or [])


def test_the_pypi_description_opens_with_pip_install(dist: Path) -> None:
    description = _metadata(dist).get_payload()
    assert isinstance(description, str)
    code = [line for line in description.splitlines() if line and not line.startswith(("#", "```"))]
    assert code[0].startswith('pip install "ktest['), code[:3]
    assert "make demo" not in description


def test_wheel_carries_py_typed_licence_data_files_and_entry_points(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as archive:
        names = set(archive.namelist())
        entry_points = archive.read(f"ktest-{ktest.__version__}.dist-info/entry_points.txt").decode()
    assert "ktest/py.typed" in names
    assert f"ktest-{ktest.__version__}.dist-info/licenses/LICENSE" in names
    assert "[pytest11]\nktest = ktest.plugin.plugin" in entry_points
    assert "ktest = ktest.cli.main:main" in entry_points
    assert not [name for name in names if name.startswith("tests/")]
    # The offline builders are a distribution of their own (offline/), not part of ktest's wheel.
    assert not [name for name in names if name.startswith(("ktest_offline/", "offline/"))]
    assert "ktest.binary_sources" not in entry_points


def test_the_offline_builders_are_a_wheel_of_their_own(dist: Path, tmp_path: Path) -> None:
    """ktest-offline, built from the source tree ktest's sdist holds (its offline/ folder): its
    package, the files its node-image build copies, and its two plug-ins, reached through entry
    points."""
    (sdist,) = dist.glob("ktest-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "sdist", filter="data")
    (tree,) = (tmp_path / "sdist").iterdir()
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path),
                    str(tree / "offline")], capture_output=True, timeout=600, check=True)
    (wheel,) = tmp_path.glob("ktest_offline-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points_file,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(entry_points_file).decode()
    assert {
        "ktest_offline/sources.py", "ktest_offline/py.typed", "ktest_offline/node_image/pause.c",
        "ktest_offline/node_image/preload.sh", "ktest_offline/node_image/files/kind/ktest-configure.sh",
    } <= names
    assert not [name for name in names if name.startswith("ktest/")]
    assert "[ktest.binary_sources]\nbuild = ktest_offline.sources:GoModules" in entry_points
    node_images = "[ktest.node_image_sources]\nktest-offline = ktest_offline.sources:OfflineNodeImages"
    assert node_images in entry_points


def test_sdist_carries_the_readme_licence_and_typed_marker(dist: Path) -> None:
    (sdist,) = dist.glob("ktest-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"README.md", "LICENSE", "docs/pypi.md", "ktest/py.typed", "pyproject.toml"} <= names


def test_ktest_version() -> None:
    result = subprocess.run([sys.executable, "-m", "ktest", "--version"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"ktest {ktest.__version__}"


def test_project_urls_and_authors(dist: Path) -> None:
    metadata = _metadata(dist)
    urls = dict(entry.split(", ", 1) for entry in metadata.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Documentation", "Issues", "Changelog"} <= set(urls), urls
    source = urls["Source"]
    assert source.startswith("https://") and all(url.startswith(source) for url in urls.values()), urls
    assert urls["Changelog"].endswith("/CHANGELOG.md")
    assert metadata["Author-email"], "authors in [project]"
    classifiers = metadata.get_all("Classifier") or []
    # 3.14 only once the suite has passed on it (no 3.14 interpreter where this was built)
    assert "Programming Language :: Python :: 3.14" not in classifiers


def test_readme_install_line_names_the_wheel_a_build_makes(dist: Path) -> None:
    """README's `pip install 'dist/ktest-X-py3-none-any.whl[kopf,xdist]'` is what a build of the
    checkout produces, and its extras exist."""
    import re

    readme = (ROOT / "README.md").read_text()
    named = re.findall(r"dist/(ktest-[^'\"\[\s]+\.whl)\[([a-z,]+)\]", readme)
    assert named, "README shows installing the built wheel"
    extras = set(_metadata(dist).get_all("Provides-Extra") or [])
    for wheel, wanted in named:
        assert wheel == _wheel(dist).name
        assert set(wanted.split(",")) <= extras
    for wanted in re.findall(r'pip install "ktest\[([a-z,]+)\]"', readme):
        assert set(wanted.split(",")) <= extras
