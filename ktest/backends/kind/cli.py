"""The kind backend's part of the ``ktest`` command.

``ktest up --backend kind`` creates a kept kind cluster (purpose ``up``) that test runs
with reuse enabled attach to; ``ktest down --kind [NAME]`` (or ``--backend kind``)
deletes kept clusters and sweeps orphans of killed runs; ``ktest status`` lists them.
Only clusters with a ktest record are ever touched. ``ktest kind build-image | images |
install``: offline kind node images and the kind binary.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from ktest.assets.progress import format_bytes
from ktest.config import Settings, add_setting_option

NAME = "kind"
"""This backend's name in ``ktest.backend_registry``."""


class _DownKind(argparse.Action):
    """``ktest down --kind [NAME]``: the kind backend's ``down``, for all kept clusters or NAME."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        namespace.kind = values
        namespace.backend = NAME


def up_from_args(args: Any, k8s_version: str | None) -> int:
    """``ktest up --backend kind``: create (or find) the warm kind cluster and print how to use it;
    ``--kind-image`` as the setting ``ktest_kind_image`` (checked the same way)."""
    from pathlib import Path

    from ktest.backends.kind.backend import KindBackend, find_kept
    from ktest.config import Source, specs_by_name

    kind_config, kind_image = args.kind_config, args.kind_image
    image_spec = specs_by_name()["kind_image"]
    image_source = f"--kind-image (default ${image_spec.env})"
    settings = Settings(
        backend=NAME,
        k8s_version=k8s_version,
        reuse=True,
        sources={"kind_image": image_source} if kind_image else {},
    ).with_values(
        kind_config=Path(kind_config).resolve() if kind_config else None,
        kind_image=image_spec.parse(kind_image or "", image_spec, Source("option", image_source, Path.cwd())),
    )
    backend = find_kept(settings)
    state = "already running"
    if backend is None:
        backend = KindBackend.start(settings, purpose="up", kept=True)
        state = "created"
    cluster = backend.kind_cluster
    try:
        print(f"ktest up: {state}: {backend.describe()}", file=sys.stderr)
        print(
            "Tests attach to it with --ktest-backend kind --ktest-reuse "
            "(or KTEST_BACKEND=kind KTEST_REUSE=1); delete it with `ktest down --kind`.",
            file=sys.stderr,
        )
        print(cluster.record.kubeconfig)
        print(f"export KUBECONFIG={shlex.quote(str(cluster.record.kubeconfig))}")
    finally:
        backend.owned = False  # kept: closing the handle must not delete it
        backend.close()
    return 0


def status_lines() -> list[str]:
    """The registry's ``status``: two lines per kind cluster ktest knows of (kept, owned by a
    live run, or orphaned), or one saying there is none. Without the docker package (the ``kind``
    extra) the clusters are listed from ktest's records, state unknown, with how to install it."""
    from ktest.backends.kind import pool, records
    from ktest.backends.kind.cluster import cluster_stopped

    lines = pool.status_lines()
    missing = docker_sdk_missing()
    for record in records.list_records():
        spare = pool.describe(record)
        if spare is not None:
            holder = spare
        elif record.kept:
            holder = "kept (ktest up / --ktest-keep-cluster)"
        elif record.holder_alive():
            holder = f"held by pid {record.owner_pid}"
        else:
            holder = (
                f"ORPHANED (holder pid {record.owner_pid} gone; the next kind run or `ktest down --kind` "
                "removes it)"
            )
        if missing is None:
            problem = cluster_stopped(record.name)
            state = "running" if problem is None else f"STOPPED ({problem})"
        else:
            state = "state unknown (asking Docker needs the docker Python package)"
        lines.append(f"kind {record.name}: {state}, Kubernetes {record.version}, {holder}")
        lines.append(f"  kubeconfig: {record.kubeconfig}")
    if missing is not None and lines:
        lines.append(f"kind: {missing}; ktest needs it to check, use or delete these clusters: "
                     f"{INSTALL_KIND_EXTRA}")
    return lines or [f"no kind clusters (records in {records.records_directory()})"]


def down_from_args(args: argparse.Namespace) -> int:
    """The registry's ``down``: ``ktest down --kind [NAME]`` (or ``--backend kind``)."""
    name = getattr(args, "kind", None)
    for line in _down_kind(None if name in (None, "*") else name) or ["no kept or orphaned kind clusters"]:
        print(f"ktest down: {line}", file=sys.stderr)
    return 0


def _down_kind(name: str | None) -> list[str]:
    """Delete kept kind clusters (all, or the one named; spares of the warm pool too, its filler
    stopped) and orphans; one line per thing done. Without the docker package (the ``kind``
    extra) a KindError names the clusters left and how to install it."""
    from ktest.backends.kind import pool, records
    from ktest.backends.kind.binary import resolve_kind
    from ktest.backends.kind.sweep import sweep_orphans
    from ktest.errors import KindError

    if name is not None and records.read_record(name) is None:
        raise KindError(
            f"no kind cluster named {name!r} was created by ktest (`ktest status` lists them; "
            f"records in {records.records_directory()}); ktest never deletes clusters it did not create"
        )
    stopped = [line for line in [pool.stop_filler()] if line] if name is None else []
    if not records.list_records():
        return stopped
    missing = docker_sdk_missing()
    if missing is not None:  # nothing below works without it: say what is left and how to go on
        left = [record.name for record in records.list_records() if name in (None, record.name)]
        done = f" (done: {'; '.join(stopped)})" if stopped else ""
        raise KindError(
            f"kind cluster{'s' if len(left) > 1 else ''} {', '.join(left)} made by ktest "
            f"{'exist' if len(left) > 1 else 'exists'} (`ktest status` lists them), but {missing}, "
            f"which ktest needs to delete kind clusters: {INSTALL_KIND_EXTRA}, then run `ktest down "
            f"--kind{' ' + name if name else ''}` again{done}"
        )
    return stopped + sweep_orphans(resolve_kind(progress=True), include_kept=True, only=name)


INSTALL_KIND_EXTRA = 'install ktest\'s kind extra (pip install "ktest[kind]")'


def docker_sdk_missing() -> str | None:
    """Why the docker Python package (of the ``kind`` extra) cannot be imported, or None when it can:
    ``ktest status`` and ``ktest down`` then say so instead of failing with ModuleNotFoundError."""
    try:
        import docker  # noqa: F401
    except ImportError as error:
        return f"the docker Python package is not installed ({error})"
    return None


def register(subparsers: Any, parsers: dict[str, argparse.ArgumentParser]) -> None:
    """The registry's ``cli``: ``ktest up --kind-config``, ``ktest down --kind [NAME]``, and
    ``ktest kind build-image | images | install``."""
    parsers["up"].add_argument(
        "--kind-config", metavar="FILE", help="extra kind Cluster config (backend kind)"
    )
    add_setting_option(parsers["up"], "kind_image")
    parsers["down"].add_argument(
        "--kind",
        nargs="?",
        const="*",
        metavar="NAME",
        action=_DownKind,
        help="delete kept kind clusters (all, or NAME) and orphans of killed runs, instead "
        "(the same as --backend kind)",
    )
    parser = subparsers.add_parser(
        "kind",
        help="build and list offline kind node images; install the kind binary",
        description=(
            "kind node images built from Go modules and Debian packages, for machines without "
            "access to registry.k8s.io or Docker Hub (with internet, kind's kindest/node is simpler)."
        ),
    )
    commands = parser.add_subparsers(title="subcommands", metavar="SUBCOMMAND")
    parser.set_defaults(help_parser=parser)  # without a subcommand: its help

    build = commands.add_parser(
        "build-image", help="build the node image for a Kubernetes version (a no-op when it exists)"
    )
    add_setting_option(build, "k8s_version")
    build.add_argument("--force", action="store_true", help="rebuild even if a matching image exists")
    build.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    build.set_defaults(handler=_build_image)

    images = commands.add_parser("images", help="list the local ktest node images and their labels")
    images.add_argument(
        "--all", action="store_true", help="also images made by another recipe or kind version"
    )
    images.set_defaults(handler=_images)

    install = commands.add_parser(
        "install", help="make the kind binary available (KTEST_KIND, PATH or built into the cache)"
    )
    install.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    install.set_defaults(handler=_install)


def _build_image(args: argparse.Namespace) -> int:
    from ktest.backends.kind.image_sources import build_node_image

    print(build_node_image(args.k8s_version, force=args.force, progress=not args.quiet))
    return 0


def _images(args: argparse.Namespace) -> int:
    from ktest.backends.kind import recipe
    from ktest.backends.kind.image_sources import list_node_images

    found = list_node_images(include_unusable=args.all)
    if not found:
        print(f"no ktest kind node images (repository {recipe.NODE_IMAGE_REPOSITORY})")
        print("build one with: ktest kind build-image [--k8s-version V]")
        return 0
    rows = [["IMAGE", "KUBERNETES", "KIND", "RECIPE", "BUILT", "SIZE", "USABLE"]]
    for info in found:
        rows.append(
            [
                info.reference,
                info.k8s_version or "-",
                info.kind_version or "-",
                info.recipe_version or "-",
                info.build_date or "-",
                format_bytes(info.size),
                "yes" if info.usable else f"no: {info.unusable_because}",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[-1])
    return 0


def _install(args: argparse.Namespace) -> int:
    from ktest.backends.kind.binary import kind_version_of, resolve_kind

    path = resolve_kind(progress=not args.quiet)
    print(f"kind {kind_version_of(path) or '(unknown version)'}: {path}")
    return 0
