"""Backend kind's clean-up after death: delete a dead holder's kind cluster.

The janitor (:mod:`ktest.base.janitor`) runs a holder's on-death command line once the holder
died without releasing it; a kind cluster registers ``command(...)``, which runs this file as a
script: ``python -I -S on_death.py KIND NAME RECORD [DIRECTORY]``. Like the janitor it imports
only the standard library (and the janitor's own file, by path), so it starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

KIND_CREATE_SETTLE = 10.0
"""Seconds without a node container before a half-made cluster counts as deleted: its ``kind
create`` was stopped while the engine was still creating a node container (copying the
image's ``/var`` into its volume takes seconds on a busy machine), which ``kind delete``
then fails to remove without a word (kind v0.33: the container stays "Created"). At 3 s a busy
2-core CI machine's engine made the container after the filler had counted the cluster deleted.
Paid only when a ``kind create`` was stopped."""
KIND_CREATE_TIMEOUT = 120.0


def command(kind: Path, name: str, record: Path, directory: Path | None) -> list[str]:
    """The command line the janitor runs if the holder of cluster ``name`` dies."""
    return [sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(kind), name, str(record)] + (
        [str(directory)] if directory is not None else []
    )


def _janitor() -> ModuleType:
    """``ktest.base.janitor``, loaded from its file: this script runs without ktest on the path."""
    path = Path(__file__).resolve().parents[2] / "base" / "janitor.py"
    spec = importlib.util.spec_from_file_location("_ktest_janitor", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kind(kind: str, *args: str) -> str:
    """``kind args``'s standard output ("" when it cannot run)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(
            [kind, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, timeout=300, check=False,
        ).stdout
    return ""


def delete_kind_cluster(kind: str, name: str, record: Path, directory: Path | None = None) -> None:
    """Delete a dead holder's kind cluster (stopping a ``kind create`` still running for it first).

    Half-made (a ``kind create`` was running, or ``directory`` has no admin kubeconfig yet), it is
    deleted until it stays deleted (:func:`delete_until_settled`).
    """
    try:
        if '"kept": true' in record.read_text():
            return  # kept on purpose after all (ktest up, --ktest-keep-cluster)
    except OSError:
        return  # no record: the holder deleted it, or it was never ktest's
    creating = _janitor().processes_mentioning(f"--name\0{name}\0")
    for pid in creating:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    delete_until_settled(
        lambda: _kind(kind, "delete", "cluster", "--name", name, "--kubeconfig", os.devnull),
        lambda: _kind(kind, "get", "nodes", "--name", name).strip(),
        half_made=bool(creating) or (directory is not None and not (directory / "admin.kubeconfig").exists()),
        poll=0.5,
    )
    with contextlib.suppress(OSError):
        record.unlink()


def delete_until_settled(
    delete: Callable[[], object], left: Callable[[], object], *, half_made: bool, poll: float
) -> None:
    """``delete()`` once; a half-made cluster again each time ``left()`` finds a node container,
    until none has for :data:`KIND_CREATE_SETTLE` seconds (or :data:`KIND_CREATE_TIMEOUT`)."""
    give_up = time.monotonic() + KIND_CREATE_TIMEOUT
    while True:
        delete()
        quiet_until = min(time.monotonic() + (KIND_CREATE_SETTLE if half_made else 0.0), give_up)
        found: object = None
        while not found and time.monotonic() < quiet_until:
            time.sleep(poll)
            found = left()
        if not found:
            return


def main(argv: list[str]) -> None:
    kind, name, record, *directory = argv
    delete_kind_cluster(kind, name, Path(record), Path(directory[0]) if directory else None)


if __name__ == "__main__":
    main(sys.argv[1:])
