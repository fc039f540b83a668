"""``ktest versions [--json] [--resolve] [--k8s-version V ...]``: which Kubernetes versions ktest supports.

The supported minors and the default come from ktest itself (no network), so a
CI workflow can build its matrix from them (``fromJSON``). Patch releases are
resolved from the installed binaries; ``--resolve`` also asks the remote
listings (Go module proxy, envtest index; cached for hours in ``versions.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from ktest import backend_registry as registry
from ktest.errors import AssetsError


def register(subparsers: Any) -> None:
    """Add ``versions`` to the ``ktest`` parser."""
    parser = subparsers.add_parser(
        "versions",
        help="supported and default Kubernetes versions (--json for CI matrices)",
        description=(
            "Print the Kubernetes minor versions ktest supports, the default, and the patch "
            "release each one resolves to where known. Unknown or unsupported --k8s-version "
            "selectors exit 2 with the list of supported ones."
        ),
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--resolve",
        action="store_true",
        help="also ask the remote version listings (Go module proxy, envtest index) for patches",
    )
    parser.add_argument(
        "--k8s-version",
        action="append",
        default=None,
        metavar="V",
        help="resolve these selectors (1.37, 1.37.2, latest; repeatable) instead of every supported minor",
    )
    parser.set_defaults(handler=_versions)


@dataclass
class VersionReport:
    """What ``ktest versions`` prints."""

    ktest_version: str
    default: str
    supported: list[str]
    kind_version: str
    resolved: dict[str, str | None] = field(default_factory=dict)
    sources: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "ktest_version": self.ktest_version,
            "default": self.default,
            "supported": self.supported,
            "backends": list(registry.matrix_names()),
            "kind_version": self.kind_version,
            "resolved": self.resolved,
        }


def supported_minors() -> list[str]:
    """Minor versions ktest supports on every backend, newest first."""
    from ktest.backends.kind import recipe

    return sorted(recipe.MINORS, key=lambda minor: tuple(int(p) for p in minor.split(".")), reverse=True)


def check_selector(text: str, supported: list[str]) -> str:
    """The selector's minor (``latest`` -> the newest supported); AssetsError naming the supported ones."""
    from ktest.assets.selectors import parse_selector

    selector = parse_selector(text)
    if selector.is_latest:
        return supported[0]
    minor = f"{selector.major}.{selector.minor}"
    if minor not in supported:
        raise AssetsError(
            f"Kubernetes version {text!r} is not supported by ktest: supported minors are "
            f"{', '.join(supported)}.\nPick one of those (e.g. --k8s-version {supported[0]}), "
            "or an exact release of one (e.g. 1.37.2)."
        )
    return minor


def build_report(selectors: list[str] | None, *, remote: bool) -> VersionReport:
    """Supported/default versions and the patch each selector resolves to (None when unknown)."""
    from ktest.assets import download, store, versions
    from ktest.assets.gobuild import find_go
    from ktest.assets.progress import as_progress
    from ktest.assets.selectors import parse_selector
    from ktest.backends.kind import recipe
    from ktest.public_api import VERSION

    supported = supported_minors()
    wanted = selectors if selectors else supported
    for text in wanted:
        check_selector(text, supported)
    # Exact releases need no listing: ask the remote listings only for what is left open.
    remote = remote and not all(parse_selector(text).is_exact for text in wanted)
    go = find_go() if remote else None
    settings = download.DownloadSettings.from_env()
    downloader = (
        download.Downloader(settings, as_progress(False)) if remote and settings.enabled else None
    )
    known = versions.known_versions(
        store.Locations.from_env(),
        go=go.path if go is not None else None,
        downloader=downloader,
        progress=as_progress(False),
    )
    candidates = known.all()
    resolved: dict[str, str | None] = {}
    for text in wanted:
        selector = parse_selector(text)
        if selector.is_exact:
            resolved[text] = selector.exact_version
        else:
            # "latest" means the newest supported minor, not whatever the proxy lists first.
            minor = parse_selector(check_selector(text, supported))
            resolved[text] = minor.newest_match(candidates)
    return VersionReport(
        ktest_version=VERSION,
        default=recipe.DEFAULT_MINOR,
        supported=supported,
        kind_version=recipe.KIND_VERSION,
        resolved=resolved,
        sources=known.describe(),
    )


def _versions(args: argparse.Namespace) -> int:
    report = build_report(args.k8s_version, remote=args.resolve)
    if args.json:
        json.dump(report.as_json(), sys.stdout, indent=1)
        print()
        return 0
    print(f"ktest {report.ktest_version}; kind backend uses kind {report.kind_version}")
    print(f"supported Kubernetes minors: {', '.join(report.supported)} (default {report.default})")
    for selector, patch in report.resolved.items():
        shown = patch or "unknown here (try --resolve, or `ktest binaries install --k8s-version ...`)"
        print(f"  {selector}: {shown}")
    if report.sources:
        print(f"known releases: {report.sources}")
    return 0
