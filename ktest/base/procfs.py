"""What the kernel says about a process (``/proc``) or a directory (``lstat``): the facts
holder records and sweeps are judged by. Standard library only (the janitor imports it)."""

from __future__ import annotations

import os
from pathlib import Path
from stat import S_ISDIR


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; the fields after ')' are fixed.
    return stat[stat.rindex(")") + 2 :].split()[19]


def process_alive(pid: int, start_time: str | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if given, started at ``start_time`` (no pid reuse)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    after_name = stat[stat.rindex(")") + 2 :].split()
    if after_name[0] in ("Z", "X"):
        return False
    return start_time is None or after_name[19] == start_time


def own_directory(path: Path) -> bool:
    """A real directory (not a symlink) of this user: the only kind a sweep judges.

    Another user's directory is never entered (its 0700 mode would make every check a
    PermissionError; as root, entering it would remove someone else's run).
    """
    try:
        stat = os.lstat(path)
    except OSError:
        return False
    return S_ISDIR(stat.st_mode) and stat.st_uid == os.getuid()
