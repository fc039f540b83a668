"""``ktest up | status | down``: a cluster kept warm between test runs.

Each backend owns its part (``up``, ``down``, ``status`` in ``ktest.backend_registry``);
this module holds the commands and backend bare's part: ``ktest up`` starts a control
plane in a background daemon and prints how to use it; a test run with reuse enabled
(``--ktest-reuse``, ini ``ktest_reuse``, ``KTEST_REUSE=1``) attaches to it instead of
starting its own.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ktest import backend_registry as registry
from ktest.config import DEFAULT_CONTROLLERS, SPECS_BY_NAME, Source, add_setting_option
from ktest.errors import ConfigError
from ktest.sessions import reuse

DEFAULT_BACKEND = "bare"
"""``ktest up`` and ``ktest down`` without ``--backend``."""


def register(subparsers: Any) -> dict[str, argparse.ArgumentParser]:
    """Add ``up``, ``status`` and ``down`` to the ``ktest`` parser; the parsers of ``up`` and
    ``down`` by name, for the backends' own options (their ``cli`` part)."""
    up = subparsers.add_parser(
        "up",
        help="start a control plane in the background, kept warm between test runs",
        description="Start etcd + kube-apiserver + kube-controller-manager in a background process "
        "that outlives this command; test runs with --ktest-reuse attach to it.",
    )
    add_setting_option(up, "k8s_version")
    add_setting_option(up, "controllers", fallback=",".join(DEFAULT_CONTROLLERS))
    add_setting_option(up, "run_dir")
    up.add_argument(
        "--backend",
        choices=registry.up_names(),
        default=DEFAULT_BACKEND,
        help="; ".join(f"{name}: {registry.spec(name).summary}" for name in registry.up_names())
        + f" (default: {DEFAULT_BACKEND})",
    )
    _add_name(up)
    up.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for readiness")
    up.set_defaults(handler=_up)

    status = subparsers.add_parser("status", help="show the warm clusters started by `ktest up`")
    status.set_defaults(handler=_status)

    down = subparsers.add_parser("down", help="stop a warm cluster started by `ktest up`")
    down.add_argument(
        "--backend",
        choices=registry.down_names(),
        default=DEFAULT_BACKEND,
        help=f"whose warm clusters (default: {DEFAULT_BACKEND})",
    )
    _add_name(down)
    down.add_argument("--all", action="store_true", help="stop every warm control plane")
    down.set_defaults(handler=_down)
    return {"up": up, "down": down}


def _add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name", default=reuse.DEFAULT_NAME, help=f"which warm control plane (default: {reuse.DEFAULT_NAME})"
    )


def _parse(name: str, text: str, flag: str) -> Any:
    spec = SPECS_BY_NAME[name]
    return spec.parse(text, spec, Source("option", f"option {flag}", Path.cwd()))


def _up(args: argparse.Namespace) -> int:
    version = _parse("k8s_version", args.k8s_version or "", "--k8s-version")
    up = registry.spec(args.backend).load("up")
    assert up is not None
    return int(up(args, version))


def up_bare(args: argparse.Namespace, version: str | None) -> int:
    """``ktest up``: a control plane in a daemon, kept until ``ktest down``."""
    controllers = _parse("controllers", args.controllers, "--controllers")
    run_dir = _parse("run_dir", args.run_dir, "--run-dir") if args.run_dir else None
    # Resolve (maybe download or build) the binaries here, where progress is visible.
    from ktest.assets import resolve_assets

    resolve_assets(version)
    print(f"ktest up: starting control plane {args.name!r} ...", file=sys.stderr, flush=True)
    record, started = reuse.up(
        name=args.name, k8s_version=version, controllers=controllers, timeout=args.timeout, run_dir=run_dir
    )
    state = "started" if started else "already running"
    print(f"ktest up: {state}: {record.summary()}", file=sys.stderr)
    print(
        f"Tests attach to it with --ktest-reuse (or KTEST_REUSE=1); stop it with "
        f"`ktest down{'' if args.name == reuse.DEFAULT_NAME else ' --name ' + args.name}`.",
        file=sys.stderr,
    )
    print(record.kubeconfig)
    print(f"export KUBECONFIG={shlex.quote(record.kubeconfig)}")
    return 0


def _status(args: argparse.Namespace) -> int:
    """``ktest status``: every backend's lines."""
    for _backend, status in registry.parts("status"):
        for line in status():
            print(line)
    return 0


def status_bare() -> list[str]:
    """Backend bare's ``ktest status``: one line per warm control plane, or one saying there is none."""
    lines = []
    for record in reuse.list_records():
        problem = record.problem()
        lines.append(f"{'running' if problem is None else 'STALE (' + problem + ')'}: {record.summary()}")
    return lines or [f"no warm control planes (records in {reuse.state_directory()})"]


def _down(args: argparse.Namespace) -> int:
    """``ktest down``: the chosen backend's part (``--backend``, or an option of its own)."""
    down = registry.spec(args.backend).load("down")
    assert down is not None  # --backend offers only backends with a ``down``
    return int(down(args))


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
