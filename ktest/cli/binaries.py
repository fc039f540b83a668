"""``ktest binaries install | path | list``: manage the control-plane binaries."""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from ktest.assets.bundle import ALL_BINARIES
from ktest.assets.progress import format_bytes
from ktest.assets.selectors import KubeVersion
from ktest.assets.sources import SOURCES
from ktest.config import add_setting_option

if TYPE_CHECKING:
    from ktest.assets.bundle import Assets

# The resolution and the cache (download, Go builds, file locks) are imported by the handlers that
# use them: every `ktest` command builds this parser, and `ktest --version` should not load them.


def register(subparsers: Any) -> None:
    """Add ``binaries`` and its subcommands to the ``ktest`` parser."""
    parser = subparsers.add_parser(
        "binaries",
        help="install, locate or list kube-apiserver/etcd/kube-controller-manager/kubectl",
        description="Find, download or build the control-plane binaries for a Kubernetes version.",
    )
    commands = parser.add_subparsers(title="subcommands", metavar="SUBCOMMAND")
    parser.set_defaults(help_parser=parser)  # without a subcommand: its help

    _resolving_command(
        commands, "install", _install,
        "make the binaries available (download or build if needed; re-install a corrupt entry)",
        ("--nodes", "also kube-scheduler and KWOK, which simulated nodes (ktest_nodes) run"),
    )
    _resolving_command(
        commands, "path", _path, "print the directory holding the binaries (installs first if needed)",
        ("--shell", "print `export KUBEBUILDER_ASSETS=...` so Go envtest suites share the binaries"),
    )

    listing = commands.add_parser("list", help="show installed versions with their sizes")
    listing.set_defaults(handler=_list)

    verify = commands.add_parser(
        "verify",
        help="check every cached binary against the SHA-256 recorded at install (exit 1 if corrupt)",
    )
    verify.add_argument(
        "--k8s-version", default=None, metavar="V", help="only this exact version (default: all)"
    )
    verify.set_defaults(handler=_verify)


def _resolving_command(
    commands: Any, name: str, handler: Any, summary: str, switch: tuple[str, str]
) -> None:
    """A subcommand that resolves the binaries (version, source, quiet) with one switch of its own."""
    parser = commands.add_parser(name, help=summary)
    add_setting_option(parser, "k8s_version")
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default="auto",
        help="auto: reuse, then download, then build; download/build: only that way",
    )
    parser.add_argument(
        "--quiet", "-q", action="store_true", help="no progress lines on stderr"
    )
    flag, flag_help = switch
    parser.add_argument(flag, action="store_true", help=flag_help)
    parser.set_defaults(handler=handler)


def _resolve(args: argparse.Namespace, *, repair: bool = False) -> Assets:
    from ktest.assets.resolve import resolve_assets

    return resolve_assets(
        args.k8s_version, source=args.source, progress=not args.quiet, repair=repair
    )


def _install(args: argparse.Namespace) -> int:
    assets = _resolve(args, repair=True)
    print(f"Kubernetes {assets.version} ({assets.origin}): {assets.directory}")
    if assets.missing:
        print(f"  missing: {', '.join(assets.missing)}")
    if args.nodes:
        from ktest import addon_registry
        from ktest.assets.progress import Progress

        tools = addon_registry.load("cli.node_tools")(assets, Progress(enabled=not args.quiet))
        print(f"simulated nodes: {tools.kube_scheduler}, {tools.kwok} (KWOK {tools.kwok_version})")
    return 0


def _path(args: argparse.Namespace) -> int:
    assets = _resolve(args)
    if args.shell:
        print(f"export KUBEBUILDER_ASSETS={shlex.quote(str(assets.directory))}")
    else:
        print(assets.directory)
    return 0


def _list(_args: argparse.Namespace) -> int:
    from ktest.assets import store as asset_store

    locations = asset_store.Locations.from_env()
    entries = asset_store.list_cache_entries(locations) + asset_store.list_envtest_entries(
        locations
    )
    if not entries:
        print(f"no binaries installed (ktest cache: {locations.k8s_dir})")
        print("install some with: ktest binaries install [--k8s-version V]")
        return 0
    header = ["VERSION", "ORIGIN", *ALL_BINARIES, "TOTAL", "DIRECTORY"]
    rows = [header]
    for entry in sorted(entries, key=lambda entry: KubeVersion.parse(entry.version), reverse=True):
        sizes = entry.sizes()
        origin = entry.origin if entry.origin == "setup-envtest" else f"cache/{entry.origin}"
        rows.append(
            [
                entry.version,
                origin,
                *(format_bytes(sizes[name]) if name in sizes else "-" for name in ALL_BINARIES),
                format_bytes(sum(sizes.values())),
                str(entry.directory),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


def _verify(args: argparse.Namespace) -> int:
    from ktest.assets import store as asset_store

    locations = asset_store.Locations.from_env()
    entries = asset_store.list_cache_entries(locations)
    if args.k8s_version:
        wanted_version = KubeVersion.parse(args.k8s_version).text
        entries = [entry for entry in entries if entry.version == wanted_version]
    if not entries:
        wanted = f"Kubernetes {args.k8s_version}" if args.k8s_version else "binaries"
        print(f"no {wanted} in ktest's cache ({locations.k8s_dir}); nothing to verify")
        return 0
    corrupt = 0
    for entry in entries:
        damage = asset_store.verify_entry(entry, full=True)
        if damage:
            corrupt += 1
            print(f"CORRUPT {entry.version}: {asset_store.damage_report(entry, damage)}")
        else:
            print(f"ok      {entry.version}: {entry.directory}")
    return 1 if corrupt else 0
