"""What a component binary accepts, learned once from its ``--help`` and cached on disk (keyed by
the binary's path, size and modification time) and in memory: probing costs a process start.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ktest.assets.store import Locations
from ktest.base.process import component_environment
from ktest.base.procfs import private_cache_directory, write_private_file
from ktest.errors import ControlPlaneError

_CACHE_FORMAT = 1
_FLAG = re.compile(r"^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)", re.MULTILINE)
_ALL_CONTROLLERS = re.compile(r"All controllers:\s*(.*?)\n\s*Disabled-by-default controllers:", re.S)

_memo_lock = threading.Lock()
_memo: dict[str, BinaryFlags] = {}


@dataclass(frozen=True)
class BinaryFlags:
    """The flags a binary knows and, for kube-controller-manager, its controllers."""

    flags: frozenset[str]
    controllers: tuple[str, ...] = ()

    def accepts(self, flag: str) -> bool:
        return flag.lstrip("-") in self.flags


def cache_directory() -> Path:
    """Beside the binaries it describes: ``${KTEST_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/ktest}/flags``."""
    return Locations.from_env().cache_root / "flags"


def _cache_key(binary: Path) -> str:
    stat = binary.stat()
    identity = f"{binary.resolve()}:{stat.st_size}:{stat.st_mtime_ns}:{_CACHE_FORMAT}"
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


def _parse(help_text: str) -> BinaryFlags:
    flags = frozenset(_FLAG.findall(help_text))
    controllers: tuple[str, ...] = ()
    match = _ALL_CONTROLLERS.search(help_text)
    if match:
        controllers = tuple(name for name in re.split(r"[,\s]+", match.group(1)) if name)
    return BinaryFlags(flags, controllers)


def probe(binary: Path) -> BinaryFlags:
    """The flags ``binary`` accepts; runs ``binary --help`` only on a cache miss."""
    try:
        key = _cache_key(binary)
    except OSError as error:
        raise ControlPlaneError(f"cannot read {binary}: {error}. Check that the binary exists.") from error
    with _memo_lock:
        if key in _memo:
            return _memo[key]
    cache_file = cache_directory() / f"{binary.name}-{key}.json"
    try:
        private_cache_directory(cache_file.parent)  # 0700, also one an older ktest made 0755
        data = json.loads(cache_file.read_text())
        result = BinaryFlags(frozenset(data["flags"]), tuple(data["controllers"]))
    except (OSError, ValueError, KeyError, TypeError):
        result = _run_help(binary)
        with contextlib.suppress(OSError):  # a read-only cache only costs a probe next time
            write_private_file(
                cache_file, json.dumps({"flags": sorted(result.flags), "controllers": result.controllers})
            )
    with _memo_lock:
        _memo[key] = result
    return result


def _run_help(binary: Path) -> BinaryFlags:
    try:
        completed = subprocess.run(
            [str(binary), "--help"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=component_environment(),
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ControlPlaneError(
            f"{binary} --help failed: {error}. Check that it is an executable for this machine."
        ) from error
    text = (completed.stdout + completed.stderr).decode("utf-8", "replace")
    result = _parse(text)
    if not result.flags:
        raise ControlPlaneError(
            f"{binary} --help printed no flags (exit status {completed.returncode}); "
            f"is it really {binary.name}?\nOutput: {text[:2000]}"
        )
    return result


def flag_name(argument: str) -> str:
    """``--feature-gates=A=true`` -> ``feature-gates``."""
    return argument.lstrip("-").split("=", 1)[0]


def merge_flags(
    defaults: Mapping[str, str | None], overrides: Sequence[str] | Mapping[str, str | None]
) -> list[str]:
    """Command-line arguments from ``defaults`` with the user's flags replacing them.

    ``overrides`` is either ``["--name=value", "--flag"]`` or ``{"name": "value"}``;
    a flag the user gives replaces ktest's value for that flag, others are appended.
    A value of None means a flag without value.
    """
    if isinstance(overrides, str):
        raise ControlPlaneError(f"extra flags must be a list such as [{overrides!r}], not a single string.")
    merged: dict[str, str | None] = dict(defaults)
    if isinstance(overrides, Mapping):
        for name, value in overrides.items():
            merged[name.lstrip("-")] = None if value is None else str(value)
    else:
        for argument in overrides:
            if not argument.startswith("-"):
                raise ControlPlaneError(
                    f"extra flag {argument!r} does not start with '--'. Pass flags as '--name=value'."
                )
            name = flag_name(argument)
            merged[name] = argument.split("=", 1)[1] if "=" in argument else None
    return [f"--{name}" if value is None else f"--{name}={value}" for name, value in merged.items()]
