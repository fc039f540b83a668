"""The binaries a control plane runs, from its ``assets=`` argument."""

from __future__ import annotations

from pathlib import Path

from ktest.assets.bundle import Assets
from ktest.errors import AssetsError


def plane_assets(given: Assets | Path | str | None, k8s_version: str | None) -> Assets:
    """``given`` itself, the directory it names, or (None) the binaries ktest finds, installs or
    builds for ``k8s_version``."""
    if isinstance(given, Assets):
        return given
    if isinstance(given, (str, Path)):
        directory = Path(given).expanduser()
        if not directory.is_dir():
            raise AssetsError(
                f"assets directory {directory} does not exist. Pass the directory that "
                "holds etcd and kube-apiserver, or leave assets=None to let ktest find them."
            )
        return Assets(directory=directory, version=k8s_version or "", origin="path")
    from ktest.assets import resolve_assets  # deferred: it pulls in download machinery

    return resolve_assets(k8s_version)
