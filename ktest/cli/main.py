"""The ``ktest`` command: one parser, subcommands registered by their modules.

Each module in ``COMMAND_MODULES`` exposes ``register(subparsers)``, adding its
parser(s) with ``set_defaults(handler=...)``; a handler takes the parsed
arguments and returns the exit code. Backends add theirs (the ``cli`` part in
``ktest.backend_registry``: subcommands of their own, options of ``up``/``down``).
"""

from __future__ import annotations

import argparse
import errno
import sys
from collections.abc import Sequence
from types import ModuleType

from ktest import addon_registry, backend_registry
from ktest.cli import binaries, init, up, versions
from ktest.errors import KtestError
from ktest.public_api import VERSION as __version__

# Add a subcommand module here (it must define ``register(subparsers)``).
COMMAND_MODULES: tuple[ModuleType, ...] = (binaries, up, versions, init)

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ktest",
        description="envtest-style integration testing of Kubernetes operators.",
    )
    parser.add_argument("--version", action="version", version=f"ktest {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    parsers: dict[str, argparse.ArgumentParser] = {}
    for module in COMMAND_MODULES:
        parsers.update(module.register(subparsers) or {})
    parsers.update(addon_registry.load("cli.rbac")(subparsers) or {})  # ktest rbac, an add-on's
    for _backend, backend_cli in backend_registry.parts("cli"):
        backend_cli(subparsers, parsers)
    return parser


_OS_ERROR_HINTS = {
    errno.ENOENT: "check the path: a directory on it does not exist",
    errno.ENOTDIR: "check the path: a part of it is a file, not a directory",
    errno.EACCES: "choose a path this user may write, or fix its permissions",
    errno.EPERM: "choose a path this user may write, or fix its permissions",
    errno.EROFS: "the file system is read-only: choose a path on a writable one",
    errno.ENOSPC: "the disk is full: free some space (`df -h`) or choose another path",
    errno.EISDIR: "the path names a directory: give a file name",
    errno.EEXIST: "something already exists there: remove it or choose another path",
}


def describe_os_error(error: OSError) -> str:
    """``error`` in one line: what failed (the path), why (the system's reason), how to fix it."""
    why = error.strerror or str(error) or type(error).__name__
    paths = [str(name) for name in (error.filename, error.filename2) if name is not None]
    what = f"cannot use {' -> '.join(paths)}: {why}" if paths else why
    default = "check the path and its permissions, then run the command again"
    hint = _OS_ERROR_HINTS.get(error.errno or 0, default)
    return f"{what} ({hint})"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (KtestError or OSError: one line on stderr, 2)."""
    try:
        parser = build_parser()  # loads every backend, installed plug-ins too
    except KtestError as error:
        print(f"ktest: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_request:  # argparse: --help, or a usage error already printed
        code = exit_request.code
        return code if isinstance(code, int) else EXIT_ERROR
    handler = getattr(args, "handler", None)
    if handler is None:  # a command without its subcommand (``ktest binaries``): that command's help
        getattr(args, "help_parser", parser).print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return int(handler(args))
    except KtestError as error:
        print(f"ktest: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as error:  # a path that cannot be read or written: one line, no traceback
        print(f"ktest: error: {describe_os_error(error)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("ktest: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
