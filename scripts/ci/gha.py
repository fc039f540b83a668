"""What every CI script shares: GitHub Actions outputs, annotations and a clear exit on bad input.

Locally (no ``GITHUB_OUTPUT``) outputs go to stdout as ``name=value`` lines, so
each script can be run and tested by hand.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping


class CIError(Exception):
    """Bad input or a failed step: the message says what, why and how to fix it."""


def set_outputs(values: Mapping[str, str]) -> None:
    """Append step outputs to ``$GITHUB_OUTPUT`` (multi-line values get a heredoc delimiter)."""
    lines: list[str] = []
    for name, value in values.items():
        if "\n" in value:
            delimiter = f"ktest_{uuid.uuid4().hex}"
            lines += [f"{name}<<{delimiter}", value, delimiter]
        else:
            lines.append(f"{name}={value}")
    path = os.environ.get("GITHUB_OUTPUT")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    else:
        print("\n".join(lines))


def notice(message: str) -> None:
    """A notice annotation on GitHub (a plain line elsewhere), on stderr."""
    print(f"::notice::{_escape(message)}" if _on_github() else f"notice: {message}", file=sys.stderr)


def warning(message: str) -> None:
    print(f"::warning::{_escape(message)}" if _on_github() else f"warning: {message}", file=sys.stderr)


def fail(error: CIError) -> int:
    """Print the error as an annotation (GitHub) or plain text; the exit code for ``main``."""
    text = str(error)
    print(f"::error::{_escape(text)}" if _on_github() else f"error: {text}", file=sys.stderr)
    return 2


def _on_github() -> bool:
    return os.environ.get("GITHUB_ACTIONS") == "true"


def _escape(message: str) -> str:
    """Workflow-command data escaping: ``%``, CR and LF."""
    return message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
