"""The tools of simulated nodes, built from Go modules: kube-scheduler and KWOK.

kube-scheduler comes from the same consumer module and Go build cache as ``ktest binaries``
(:class:`~ktest_offline.kubernetes.KubernetesBuilder`), so it costs one more link once the
control plane is built. KWOK is ``go install sigs.k8s.io/kwok/cmd/kwok@vX`` (its own go.mod,
no replacements); its Stage CRD is read from the same module download.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from ktest.assets.gotool import GoTool, go_install
from ktest.assets.progress import Progress
from ktest.assets.store import Locations
from ktest.errors import AssetsError, KtestError
from ktest_offline.kubernetes import KubernetesBuilder, _run_go

KWOK_MODULE = "sigs.k8s.io/kwok"
KWOK_STAGE_CRD = "kustomize/crd/bases/kwok.x-k8s.io_stages.yaml"
TOOLS = ("kube-scheduler", "kwok")


def install_tool(
    go: GoTool, name: str, version: str, destination: Path, progress: Progress
) -> dict[str, Any]:
    """Build ``name`` (``kube-scheduler`` at Kubernetes ``version``, ``kwok`` at KWOK ``version``)
    into the directory ``destination``; facts for the cache entry's metadata."""
    started = time.monotonic()
    if name == "kube-scheduler":
        builder = KubernetesBuilder(go, Locations.from_env().gobuild_dir, progress)
        builder.build_kubernetes(builder.kubernetes_module(version), ("kube-scheduler",), destination)
    elif name == "kwok":
        _install_kwok(go, version, destination, progress)
    else:
        raise AssetsError(f"ktest-offline builds {', '.join(TOOLS)}, not {name!r}")
    return {"go_version": go.version, "build_seconds": round(time.monotonic() - started, 1)}


def _install_kwok(go: GoTool, version: str, destination: Path, progress: Progress) -> None:
    target = f"{KWOK_MODULE}/cmd/kwok@v{version}"
    try:
        go_install(
            go,
            target,
            "kwok",
            destination / "kwok",
            progress,
            f"building KWOK v{version} from Go modules, first time only",
            ldflags=f"-X {KWOK_MODULE}/pkg/consts.Version={version}",
        )
    except KtestError as error:
        raise AssetsError(str(error)) from error
    info = json.loads(
        _run_go(
            go,
            ["mod", "download", "-json", f"{KWOK_MODULE}@v{version}"],
            destination,
            f"finding KWOK v{version}'s module download",
        )
    )
    crd = Path(str(info.get("Dir") or "")) / KWOK_STAGE_CRD
    if not crd.is_file():
        raise AssetsError(f"KWOK v{version}'s module ({info.get('Dir')}) has no {KWOK_STAGE_CRD}")
    shutil.copyfile(crd, destination / "stages.crd.yaml")
