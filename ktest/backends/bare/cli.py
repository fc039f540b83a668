"""Backend bare's part of ``ktest up | status | down``: a control plane in a background daemon.

``ktest up`` starts one (:mod:`ktest.backends.bare.daemon`) and prints how to use it; a test
run with reuse enabled (``--ktest-reuse``, ini ``ktest_reuse``, ``KTEST_REUSE=1``) attaches to
it instead of starting its own; ``ktest down`` stops it; ``ktest status`` lists them. The
module imports nothing heavy: the ``ktest`` command loads every backend's ``cli`` part.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ktest.backends.bare import reuse
from ktest.config import DEFAULT_CONTROLLERS, Source, add_setting_option, specs_by_name
from ktest.errors import ConfigError


def register(subparsers: Any, parsers: dict[str, argparse.ArgumentParser]) -> None:
    """The registry's ``cli``: bare's options of ``ktest up`` and ``ktest down``."""
    up = parsers["up"]
    add_setting_option(up, "controllers", fallback=",".join(DEFAULT_CONTROLLERS))
    add_setting_option(up, "run_dir")
    add_setting_option(up, "nodes", fallback="0")
    _add_name(up)
    up.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for readiness")
    _add_name(parsers["down"])


def _add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name", default=reuse.DEFAULT_NAME, help=f"which warm control plane (default: {reuse.DEFAULT_NAME})"
    )


def _parse(name: str, text: str, flag: str) -> Any:
    spec = specs_by_name()[name]
    return spec.parse(text, spec, Source("option", f"option {flag}", Path.cwd()))


def up_bare(args: argparse.Namespace, version: str | None) -> int:
    """``ktest up``: a control plane in a daemon, kept until ``ktest down``."""
    controllers = _parse("controllers", args.controllers, "--controllers")
    run_dir = _parse("run_dir", args.run_dir, "--run-dir") if args.run_dir else None
    nodes = _parse("nodes", args.nodes, "--nodes")
    # Resolve (maybe download or build) the binaries here, where progress is visible.
    from ktest.assets import resolve_assets

    resolve_assets(version)
    print(f"ktest up: starting control plane {args.name!r} ...", file=sys.stderr, flush=True)
    record, started = reuse.up(
        name=args.name, k8s_version=version, controllers=controllers, timeout=args.timeout, run_dir=run_dir,
        nodes=nodes,
    )
    state = "started" if started else "already running"
    print(f"ktest up: {state}: {record.summary()}", file=sys.stderr)
    print(
        f"Tests attach to it with --ktest-reuse (or KTEST_REUSE=1); stop it with "
        f"`ktest down{'' if args.name == reuse.DEFAULT_NAME else ' --name ' + args.name}`.",
        file=sys.stderr,
    )
    print(record.share.kubeconfig)
    print(f"export KUBECONFIG={shlex.quote(record.share.kubeconfig)}")
    return 0


def status_bare() -> list[str]:
    """Backend bare's ``ktest status``: one line per warm control plane, or one saying there is none."""
    lines = []
    for record in reuse.list_records():
        problem = record.problem()
        lines.append(f"{'running' if problem is None else 'STALE (' + problem + ')'}: {record.summary()}")
    return lines or [f"no warm control planes (records in {reuse.state_directory()})"]


def down_bare(args: argparse.Namespace) -> int:
    """Backend bare's ``ktest down``: stop the warm control plane ``--name`` (or ``--all``)."""
    if args.all:
        records = reuse.list_records()
    else:
        record = reuse.read_record(reuse.record_path(args.name))
        if record is None:
            swept = _sweep_leftovers()
            if swept:
                print(f"ktest down: no warm control plane named {args.name!r};{swept}", file=sys.stderr)
                return 0
            raise ConfigError(
                f"no warm control plane named {args.name!r} (see `ktest status`; records in "
                f"{reuse.state_directory()}){swept}"
            )
        records = [record]
    for record in records:
        if reuse.down(record):
            print(f"ktest down: stopped {record.name!r} (pid {record.pid})", file=sys.stderr)
        else:
            print(
                f"ktest down: {record.name!r} was not running (its daemon, pid {record.pid}, had "
                "already exited); removed its record and what it left behind",
                file=sys.stderr,
            )
    swept = _sweep_leftovers()
    if swept:
        print(f"ktest down: {swept.strip()}", file=sys.stderr)
    return 0


def _sweep_leftovers() -> str:
    """Remove socket and control-plane directories of dead ktest processes; say what went."""
    from ktest.base import janitor
    from ktest.controlplane.plane import default_base_directory
    from ktest.sessions.shared import sweep_stale_shares

    bases = {default_base_directory()}
    if os.environ.get("KTEST_RUN_DIR"):
        bases.add(Path(os.environ["KTEST_RUN_DIR"]).expanduser())
    removed = janitor.sweep_leftovers(bases, more=[sweep_stale_shares])
    if not removed:
        return ""
    names = ", ".join(str(path) for path in removed)
    return f"\nremoved what dead ktest processes left: {names}"
