"""Go goroutine dumps folded to their first goroutine, for failure reports.

A Go program that panics with ``GOTRACEBACK=all`` (or hits a fatal runtime error, or gets
SIGQUIT) prints every goroutine's stack: a controller-runtime manager has dozens, a hundred
lines and more, and only the first (the one that failed) usually matters. The report keeps that
one and says how many were folded and where the whole log is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

GOROUTINE_HEADER = re.compile(r"^goroutine \d+ (?:gp=\S+ m=\S+ (?:mp=\S+ )?)?\[[^\]]*\]:\s*$")


@dataclass(frozen=True)
class Folded:
    """The text with each dump's later goroutines replaced by one line, and how many were."""

    text: str
    goroutines: int


def fold_goroutines(text: str, note: Callable[[int], str]) -> Folded:
    """``text`` with every goroutine dump cut to its first goroutine; ``note(count)`` is the line
    that stands for the ``count`` goroutines left out of one dump."""
    lines = text.split("\n")
    kept: list[str] = []
    folded_total = 0
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        if not GOROUTINE_HEADER.match(line):
            continue
        index = _block_end(lines, index, kept)  # the first goroutine stays whole
        folded = 0
        while index + 1 < len(lines) and lines[index] == "" and GOROUTINE_HEADER.match(lines[index + 1]):
            folded += 1
            index = _block_end(lines, index + 2, None)
        if folded:
            folded_total += folded
            kept += ["", note(folded)]
    return Folded("\n".join(kept), folded_total)


def _block_end(lines: list[str], index: int, kept: list[str] | None) -> int:
    """The index after one goroutine's frames, copying them to ``kept``. A frame is a function
    line followed by its tab-indented ``file:line``; whatever else follows (the program's next
    output, ``exit status 2``) is no part of the dump."""
    while index < len(lines) and _is_frame_line(lines, index):
        if kept is not None:
            kept.append(lines[index])
        index += 1
    return index


def _is_frame_line(lines: list[str], index: int) -> bool:
    line = lines[index]
    if line.startswith("\t") or (line.startswith("...") and "frames elided" in line):
        return True
    following = lines[index + 1] if index + 1 < len(lines) else ""
    return line != "" and following.startswith("\t")
