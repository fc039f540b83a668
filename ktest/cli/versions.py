"""``ktest versions [--json] [--resolve] [--k8s-version V ...]``: which Kubernetes versions ktest
supports, and for each minor what this machine has and how it would get the rest.

Per supported minor (ktest/assets/minors.py): the etcd its kubeadm runs, the patch it resolves
to, the binaries installed here, the node images each backend reports (kind's: those the Docker
engine holds; a backend's ``versions`` part, ktest/backend_registry.py), and how
``ktest binaries install`` would obtain it (reuse, envtest download, Go build from the module
proxy, or not here and why). The supported minors and the default come from ktest itself (no
network), so a CI workflow can build its matrix from ``--json`` (``fromJSON``). Patch releases
are resolved from the installed binaries; ``--resolve`` also asks the remote listings (Go module
proxy, envtest index; cached for hours in ``versions.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ktest import backend_registry as registry
from ktest.assets import minors
from ktest.assets.selectors import KubeVersion, parse_selector
from ktest.errors import AssetsError

if TYPE_CHECKING:
    from ktest.assets.gotool import GoTool
    from ktest.assets.sources import BinarySource
    from ktest.assets.versions import KnownVersions
    from ktest.backend_registry import BackendVersions


def register(subparsers: Any) -> None:
    """Add ``versions`` to the ``ktest`` parser."""
    parser = subparsers.add_parser(
        "versions",
        help="supported Kubernetes minors, what is installed here and how the rest is obtained "
        "(--json for CI matrices)",
        description=(
            "Print the Kubernetes minor versions ktest supports, the default, and per minor: the "
            "etcd it runs, the patch release it resolves to where known, the binaries installed "
            "here, the kind node images the Docker engine holds, and how `ktest binaries install` "
            "would obtain it. Unknown or unsupported --k8s-version selectors exit 2 with the "
            "list of supported ones."
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
class MinorStatus:
    """One supported minor on this machine: ``ktest versions``' row."""

    minor: str
    role: str  # "default", "older" (the second minor CI tests) or ""
    etcd: str
    patch: str | None
    installed: list[str]
    node_images: list[str]
    node_images_unknown: str  # why node images could not be looked for ("" when they could)
    obtain: str  # "installed", "download", "build" or "none"
    obtain_detail: str
    node_image_lines: list[str] = field(default_factory=list)  # "kind node image: ..." per backend

    def as_json(self) -> dict[str, Any]:
        return {
            "minor": self.minor,
            "supported": True,
            "role": self.role,
            "etcd": self.etcd,
            "patch": self.patch,
            "installed": self.installed,
            # None: unknown (no Docker engine); else the references found, [] for none.
            "node_images": None if self.node_images_unknown else self.node_images,
            "node_images_note": self.node_images_unknown,
            "obtain": self.obtain,
            "obtain_detail": self.obtain_detail,
        }


@dataclass
class VersionReport:
    """What ``ktest versions`` prints."""

    ktest_version: str
    default: str
    older: str
    supported: list[str]
    backend_versions: dict[str, BackendVersions] = field(default_factory=dict)
    resolved: dict[str, str | None] = field(default_factory=dict)
    minors: list[MinorStatus] = field(default_factory=list)
    sources: str = ""

    def as_json(self) -> dict[str, Any]:
        """The versions, each backend's tool version as ``<backend>_version``, each minor's own
        JSON and the backends a matrix can use."""
        return {
            "ktest_version": self.ktest_version,
            "default": self.default,
            "older": self.older,
            "supported": self.supported,
            **{f"{name}_version": part.version for name, part in self.backend_versions.items()},
            "resolved": self.resolved,
            "minors": [status.as_json() for status in self.minors],
            "backends": list(registry.names("creates_cluster")),
        }

    def header(self) -> str:
        """``ktest 0.2.0; kind backend uses kind v0.33.0``."""
        tools = [f"; {name} backend uses {part.tool} {part.version}"
                 for name, part in self.backend_versions.items()]
        return f"ktest {self.ktest_version}{''.join(tools)}"


def check_selector(text: str, supported: list[str]) -> str:
    """The selector's minor (``latest`` -> the newest supported); AssetsError naming the supported ones."""
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


@dataclass(frozen=True)
class Means:
    """What this machine has to obtain binaries with: the versions listed, whether the remote
    listings were asked, whether downloads are on, the registered binary sources and Go."""

    known: KnownVersions
    remote: bool
    downloads_enabled: bool
    builders: tuple[BinarySource, ...]
    go: GoTool | None


def how_obtained(minor: str, installed: list[str], means: Means) -> tuple[str, str]:
    """How ``ktest binaries install --k8s-version <minor>`` would get this minor here, in the order
    it tries (reuse, envtest download, a registered binary source such as ktest-offline's Go
    build): ``(way, explanation)``; way ``none`` says why not."""
    if installed:
        return "installed", f"installed here: {', '.join(installed)}"
    build, build_unavailable = _build_plan(minor, means)
    known, remote = means.known, means.remote
    why_not: list[str] = []
    if not means.downloads_enabled:
        why_not.append("downloads are off (KTEST_DOWNLOAD)")
    elif remote and "envtest index" in known.failures:
        why_not.append(f"the envtest index is unreachable ({known.failures['envtest index']})")
    elif remote:
        listed = parse_selector(minor).newest_match(known.by_source.get("envtest index", []))
        if listed is not None:
            return "download", f"envtest download of {listed} (kube-controller-manager from the release site)"
        why_not.append(f"the envtest index lists no {minor} release")
    else:
        fallback = f"else {build}" if build else f"no build either: {build_unavailable}"
        return "download", f"envtest download if the envtest index lists it (--resolve checks); {fallback}"
    if build:
        return "build", build
    return "none", "not obtainable here: " + "; ".join([*why_not, build_unavailable])


def _build_plan(minor: str, means: Means) -> tuple[str, str]:
    """``(how a build would go, "")`` or ``("", why no build can run here)``."""
    from ktest.assets.gotool import version_numbers
    from ktest.assets.sources import not_installed_note

    known, builders, go = means.known, means.builders, means.go
    facts = minors.facts(minor)
    available = [source for source in builders if not source.unavailable()]
    if not builders:
        return "", not_installed_note()
    if not available:
        return "", "; ".join(f"{source.label}: {source.unavailable()}" for source in builders)
    if go is None:
        return "", "no `go` on PATH for a Go build"
    if go.go_version_tuple() < version_numbers(facts.go) and go.toolchain == "local":
        return "", f"{go.version} is older than the Go {facts.go} {minor}'s go.mod needs (GOTOOLCHAIN=local)"
    if means.remote and "Go module proxy" in known.failures:
        return "", f"the Go module proxy is unreachable ({known.failures['Go module proxy']})"
    patch = parse_selector(minor).newest_match(known.by_source.get("Go module proxy", []))
    target = f"k8s.io/kubernetes v{patch}" if patch else f"k8s.io/kubernetes v{minor}.x"
    return (
        f"{available[0].label} via the Go module proxy ({target} and etcd {facts.etcd} with "
        f"{go.version}; about 10-15 min the first time on 2 cores)",
        "",
    )


def node_image_facts(minor: str, parts: dict[str, BackendVersions]) -> tuple[list[str], str, list[str]]:
    """The node images of ``minor`` every backend reports, why some could not be looked for ("" if
    all could), and one line per backend (``kind node image: none (`ktest kind build-image ...`)``)."""
    images: list[str] = []
    unknown: list[str] = []
    lines: list[str] = []
    for name, part in parts.items():
        found = part.node_images.for_minor(minor)
        images += found
        if part.node_images.unknown:
            unknown.append(part.node_images.unknown)
        missing = f"none (`{part.build_hint.format(minor=minor)}`)"
        text = part.node_images.unknown or ", ".join(found) or missing
        lines.append(f"{name} node image: {text}")
    return images, "; ".join(unknown), lines


def build_report(selectors: list[str] | None, *, remote: bool) -> VersionReport:
    """Supported/default versions, the patch each selector resolves to (None when unknown) and
    each minor's status here, with each backend's ``versions`` part (kind's asks the Docker engine)."""
    from ktest.assets import download, sources, store, versions
    from ktest.assets.gotool import find_go
    from ktest.assets.progress import as_progress
    from ktest.public_api import VERSION

    supported = minors.supported_minors()
    wanted = selectors if selectors else supported
    wanted_minors = list(dict.fromkeys(check_selector(text, supported) for text in wanted))
    # Exact releases need no listing: ask the remote listings only for what is left open.
    remote = remote and not all(parse_selector(text).is_exact for text in wanted)
    go = find_go()
    settings = download.DownloadSettings.from_env()
    downloader = (
        download.Downloader(settings, as_progress(False)) if remote and settings.enabled else None
    )
    locations = store.Locations.from_env()
    known = versions.known_versions(
        locations,
        go=go.path if remote and go is not None else None,
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
            newest_supported = parse_selector(check_selector(text, supported))
            resolved[text] = newest_supported.newest_match(candidates)
    parts = {spec.name: part() for spec, part in registry.parts("versions")}
    installed_here = known.by_source.get("installed", [])
    means = Means(known, remote, settings.enabled, sources.binary_sources(), go)
    statuses = []
    for minor in wanted_minors:
        installed = [v for v in installed_here if v.startswith(minor + ".")]
        installed.sort(key=KubeVersion.parse, reverse=True)
        way, detail = how_obtained(minor, installed, means)
        role = {minors.DEFAULT_MINOR: "default", minors.OLDER_MINOR: "older"}.get(minor, "")
        images, unknown, lines = node_image_facts(minor, parts)
        statuses.append(
            MinorStatus(
                minor=minor,
                role=role,
                etcd=minors.facts(minor).etcd,
                patch=parse_selector(minor).newest_match(candidates),
                installed=installed,
                node_images=images,
                node_images_unknown=unknown,
                obtain=way,
                obtain_detail=detail,
                node_image_lines=lines,
            )
        )
    return VersionReport(
        ktest_version=VERSION,
        default=minors.DEFAULT_MINOR,
        older=minors.OLDER_MINOR,
        supported=supported,
        backend_versions=parts,
        resolved=resolved,
        minors=statuses,
        sources=known.describe(),
    )


def _versions(args: argparse.Namespace) -> int:
    report = build_report(args.k8s_version, remote=args.resolve)
    if args.json:
        json.dump(report.as_json(), sys.stdout, indent=1)
        print()
        return 0
    print(report.header())
    print(
        f"supported Kubernetes minors: {', '.join(report.supported)} "
        f"(default {report.default}; CI also tests {report.older})"
    )
    for status in report.minors:
        role = f" ({status.role})" if status.role else ""
        print(f"{status.minor}{role}: supported; etcd {status.etcd}; patch {status.patch or 'unknown here'}")
        print(f"  installed here: {', '.join(status.installed) or 'no'}")
        for line in status.node_image_lines:
            print(f"  {line}")
        print(f"  obtained by: {status.obtain_detail}")
    for selector, patch in report.resolved.items():
        if selector in report.supported:
            continue  # shown above
        shown = patch or "unknown here (try --resolve, or `ktest binaries install --k8s-version ...`)"
        print(f"{selector}: {shown}")
    if report.sources:
        print(f"known releases: {report.sources}")
    return 0
