"""``pip install "ktest[kind]"`` installs no GPL-licensed distribution (ktest is Apache-2.0).

pip itself resolves the ``kind`` extra of this checkout (``--dry-run --report``, every
requirement taken fresh from the package index as for a user), and each distribution it
would install is judged by its own metadata: License-Expression, License and classifiers.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib.metadata import metadata
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What building the project's metadata reads: pyproject.toml and the files it names.
PROJECT_FILES = ("pyproject.toml", "LICENSE", "docs/pypi.md")
GPL_MARKERS = ("GPL", "GENERAL PUBLIC LICENSE")  # GPL, LGPL and AGPL, as expression, text or classifier


def gpl_licence(meta: dict[str, Any]) -> str | None:
    """The GPL-family licence a distribution's metadata declares (as pip's report or
    importlib.metadata give it, keys lower-case), else None."""
    declared = [
        meta.get("license_expression") or "",
        (meta.get("license") or "").strip().splitlines()[0] if (meta.get("license") or "").strip() else "",
        *[c for c in meta.get("classifier") or [] if c.startswith("License ::")],
    ]
    for text in declared:
        if any(marker in text.upper() for marker in GPL_MARKERS):
            return text
    return None


def _installed(name: str) -> dict[str, Any]:
    found = metadata(name)
    return {
        "license_expression": found.get("License-Expression"),
        "license": found.get("License"),
        "classifier": found.get_all("Classifier") or [],
    }


def test_the_licence_check_knows_gpl_when_it_sees_it() -> None:
    """On real metadata: pytest-kind-ng (GPL-3.0-or-later by expression, in the dev extra) is caught,
    and so are the older forms pytest-kind used (a License line and a classifier)."""
    assert gpl_licence(_installed("pytest-kind-ng")) == "GPL-3.0-or-later"
    assert gpl_licence({"license": "GPL-3.0+"}) == "GPL-3.0+"
    classifier = "License :: OSI Approved :: GNU General Public License v3 or later (GPLv3+)"
    assert gpl_licence({"classifier": [classifier]}) == classifier
    assert gpl_licence({"license": "GNU Lesser General Public License v2.1\n..."}) is not None
    assert gpl_licence(_installed("pykube-ng")) is None  # Apache, with an odd extra classifier
    assert gpl_licence(_installed("docker")) is None


@pytest.mark.timeout(600)
def test_pip_install_ktest_kind_brings_no_gpl_distribution(tmp_path: Path) -> None:
    project = tmp_path / "ktest"
    for name in PROJECT_FILES:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(ROOT / "ktest", project / "ktest", ignore=shutil.ignore_patterns("__pycache__"))
    report = tmp_path / "report.json"
    resolved = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--disable-pip-version-check", "--report", str(report), f"{project}[kind]"],
        capture_output=True, text=True, timeout=540, check=False, stdin=subprocess.DEVNULL,
    )
    assert resolved.returncode == 0, f"pip could not resolve ktest[kind]:\n{resolved.stderr[-3000:]}"
    items = json.loads(report.read_text())["install"]
    installs = {item["metadata"]["name"].lower(): item["metadata"] for item in items}
    # the extra was resolved: what the kind backend and kind_cluster.api need is there
    assert {"ktest", "docker", "pykube-ng"} <= set(installs), sorted(installs)
    gpl = {name: gpl_licence(meta) for name, meta in installs.items() if gpl_licence(meta)}
    assert gpl == {}, f"ktest[kind] would install GPL-licensed distributions: {gpl}"
