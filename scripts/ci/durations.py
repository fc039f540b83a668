"""Test durations for pytest-split, across the shards of a matrix.

pytest-split reads one durations file (``{node id: seconds}``) to balance the
shards and, with ``--store-durations --clean-durations``, each shard writes the
durations of the tests it ran. It does not merge the shards' files; this does:

* ``durations.py check PATH``: before a shard runs; a missing or unreadable file means an even
  split this time (a notice says so, an unreadable file is removed);
* ``durations.py merge --output PATH [--base PATH] --expected N SHARD_FILE...``: after the matrix.
  All N shards reported: the union of their files (tests gone from the suite drop out). Some
  missing (a cancelled or crashed shard): the base file with the reported durations on top,
  so the missing shards' tests keep their old durations. A test reported by two shards (the
  same suite in several matrix cells) keeps the longer duration.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gha import CIError, fail, notice, set_outputs

Durations = dict[str, float]


def read_durations(path: Path) -> Durations:
    """A durations file; CIError naming the file when it is not ``{str: number}`` JSON."""
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise CIError(f"cannot read durations file {path}: {error}") from error
    except ValueError as error:
        raise CIError(f"durations file {path} is not JSON: {error}") from error
    if isinstance(data, list):  # pytest-split's old list-of-pairs format
        try:
            data = dict(data)
        except (TypeError, ValueError) as error:
            raise CIError(f"durations file {path}: a list that is not [test, seconds] pairs") from error
    if not isinstance(data, dict):
        raise CIError(f"durations file {path}: expected an object of test id -> seconds")
    durations: Durations = {}
    for test, seconds in data.items():
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
            raise CIError(f"durations file {path}: {test!r} has {seconds!r}, not a duration in seconds")
        durations[str(test)] = float(seconds)
    return durations


@dataclass
class Merged:
    durations: Durations
    complete: bool
    duplicates: list[str] = field(default_factory=list)
    dropped: int = 0


def merge(shards: Sequence[Durations], expected: int, base: Durations | None = None) -> Merged:
    """Combine the shards' durations (see the module docstring for the rules)."""
    reported: Durations = {}
    duplicates: list[str] = []
    for durations in shards:
        for test, seconds in durations.items():
            if test in reported:
                duplicates.append(test)
                reported[test] = max(reported[test], seconds)
            else:
                reported[test] = seconds
    complete = len(shards) >= expected
    if complete:
        dropped = len(set(base or {}) - set(reported))
        return Merged(dict(sorted(reported.items())), True, sorted(set(duplicates)), dropped)
    combined = {**(base or {}), **reported}
    return Merged(dict(sorted(combined.items())), False, sorted(set(duplicates)))


def check(path: Path) -> bool:
    """True when ``path`` is a usable durations file; else a notice (and an unreadable file removed)."""
    if not path.is_file():
        notice(f"no recorded test durations at {path}: pytest-split splits the tests evenly this time")
        return False
    try:
        durations = read_durations(path)
    except CIError as error:
        notice(f"{error}; removed, so pytest-split splits the tests evenly this time")
        path.unlink()
        return False
    if not durations:
        notice(f"{path} records no tests: pytest-split splits the tests evenly this time")
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check_parser = commands.add_parser("check")
    check_parser.add_argument("path", type=Path)
    merge_parser = commands.add_parser("merge")
    merge_parser.add_argument("--output", required=True, type=Path)
    merge_parser.add_argument("--base", type=Path, default=None)
    merge_parser.add_argument("--expected", required=True, type=int, help="how many shards ran")
    merge_parser.add_argument("shards", nargs="*", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            set_outputs({"found": "true" if check(args.path) else "false"})
            return 0
        base = read_durations(args.base) if args.base is not None and args.base.is_file() else None
        merged = merge([read_durations(path) for path in args.shards], args.expected, base)
    except CIError as error:
        return fail(error)
    if not merged.complete:
        notice(
            f"{len(args.shards)} of {args.expected} shards recorded durations; the others' tests keep "
            "their previous durations"
        )
    if merged.duplicates:
        notice(f"{len(merged.duplicates)} tests ran in several matrix cells; kept the longest duration")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(merged.durations, indent=1, sort_keys=True) + "\n")
    set_outputs({"tests": str(len(merged.durations)), "complete": str(merged.complete).lower()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
