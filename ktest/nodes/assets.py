"""The two binaries simulated nodes need, cached beside ktest's other binaries.

* ``kube-scheduler``, of the same Kubernetes version as the control plane;
* ``kwok`` (:data:`KWOK_VERSION`), with the Stage CRD of the same release.

Layout: ``<cache>/nodes/kube-scheduler-<version>-linux-<arch>/kube-scheduler`` and
``<cache>/nodes/kwok-<version>-linux-<arch>/{kwok,stages.crd.yaml}``, each with
``ktest-node-tools.json``. An entry is filled in a scratch directory and renamed into place
under a file lock, so it is complete or absent. A binary source that offers
``install_tool(name, version, destination, progress)`` (``ktest-offline`` builds from Go
modules) fills it; ``KTEST_NODE_TOOLS`` names a directory holding both tools ready-made.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ktest.assets.bundle import Assets
from ktest.assets.progress import Progress, holding_lock
from ktest.assets.sources import INSTALL_OFFLINE, binary_sources
from ktest.assets.store import Locations
from ktest.errors import AssetsError

KWOK_VERSION = "0.8.0"
STAGE_CRD_FILE = "stages.crd.yaml"
METADATA_FILE = "ktest-node-tools.json"
TOOLS_VARIABLE = "KTEST_NODE_TOOLS"


@dataclass(frozen=True)
class NodeTools:
    """Where the scheduler, KWOK and the Stage CRD are for one Kubernetes version."""

    kube_scheduler: Path
    kwok: Path
    stage_crd: Path
    kwok_version: str = KWOK_VERSION


def node_tools(
    assets: Assets, progress: Progress | None = None, env: Mapping[str, str] | None = None
) -> NodeTools:
    """The tools for ``assets``' Kubernetes version: from ``KTEST_NODE_TOOLS``, the control plane's
    own directory (a kube-scheduler beside kube-apiserver), the cache, or installed once."""
    env = os.environ if env is None else env
    progress = progress or Progress(enabled=False)
    given = env.get(TOOLS_VARIABLE)
    if given:
        return _from_directory(Path(given).expanduser(), f"{TOOLS_VARIABLE}={given}")
    locations = Locations.from_env(env)
    scheduler = (
        assets.directory / "kube-scheduler"
        if assets.has("kube-scheduler")
        else _tool_entry(locations, "kube-scheduler", assets.version, progress) / "kube-scheduler"
    )
    kwok_entry = _tool_entry(locations, "kwok", KWOK_VERSION, progress)
    return NodeTools(scheduler, kwok_entry / "kwok", kwok_entry / STAGE_CRD_FILE)


def _from_directory(directory: Path, origin: str) -> NodeTools:
    tools = NodeTools(directory / "kube-scheduler", directory / "kwok", directory / STAGE_CRD_FILE)
    missing = [
        path.name for path in (tools.kube_scheduler, tools.kwok, tools.stage_crd) if not path.is_file()
    ]
    if missing:
        raise AssetsError(
            f"{origin}: {directory} lacks {', '.join(missing)}. Put kube-scheduler, kwok "
            f"(v{KWOK_VERSION}) and KWOK's Stage CRD ({STAGE_CRD_FILE}) there, or unset "
            f"{TOOLS_VARIABLE} so that ktest installs them into its cache."
        )
    return tools


def tool_directory(locations: Locations, name: str, version: str) -> Path:
    """The cache entry of tool ``name`` at ``version`` (may not exist yet)."""
    return locations.cache_root / "nodes" / f"{name}-{version}-linux-{locations.arch}"


def _complete(entry: Path, name: str) -> bool:
    return (entry / METADATA_FILE).is_file() and os.access(entry / name, os.X_OK)


def _tool_entry(locations: Locations, name: str, version: str, progress: Progress) -> Path:
    """The cache entry of ``name`` at ``version``, installed by a binary source if missing."""
    entry = tool_directory(locations, name, version)
    if _complete(entry, name):
        return entry
    entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with holding_lock(
        entry.with_name(entry.name + ".lock"), progress, f"another process is installing {name} {version}"
    ):
        if _complete(entry, name):
            return entry
        _install(entry, name, version, progress)
    return entry


def _install(entry: Path, name: str, version: str, progress: Progress) -> None:
    sources = [source for source in binary_sources() if hasattr(source, "install_tool")]
    usable = [(source, source.unavailable()) for source in sources]
    tried = [f"{source.label}: {why}" for source, why in usable if why is not None]
    ready = [source for source, why in usable if why is None]
    if not ready:
        ways = "; ".join(tried) or f"no binary source can build it ({INSTALL_OFFLINE})"
        raise AssetsError(
            f"simulated nodes need {name} {version}, which is not in ktest's cache ({entry}), and "
            f"nothing could install it: {ways}.\nInstall Go and ktest-offline, or set "
            f"{TOOLS_VARIABLE} to a directory holding kube-scheduler, kwok and {STAGE_CRD_FILE}."
        )
    scratch = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=entry.parent))
    try:
        details = ready[0].install_tool(name, version, scratch, progress)
        if not os.access(scratch / name, os.X_OK):
            raise AssetsError(
                f"{ready[0].label} reported {name} {version} installed, but {scratch} has no {name}"
            )
        metadata = {
            "tool": name,
            "version": version,
            "arch": entry.name.rsplit("-", 1)[-1],
            "origin": ready[0].name,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **dict(details),
        }
        (scratch / METADATA_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
        scratch.chmod(0o700)
        if entry.exists():
            shutil.rmtree(entry)
        os.rename(scratch, entry)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
