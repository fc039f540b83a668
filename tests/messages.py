"""Checks of the messages ktest's errors and assertions carry, written once
(``from messages import assert_says``: tests/ is on ``sys.path``)."""

from __future__ import annotations


def assert_says(error: BaseException | str, *fragments: str, starts_with: str | None = None) -> str:
    """Assert that the message of ``error`` starts with ``starts_with`` (when given) and contains
    every one of ``fragments``; a failure names all that is missing and shows the whole message.

    Returns the message, for checks of another kind (regular expressions, absences)."""
    message = str(error)
    missing = [fragment for fragment in fragments if fragment not in message]
    if starts_with is not None and not message.startswith(starts_with):
        missing.insert(0, f"(at the start) {starts_with}")
    listed = "\n".join(f"  {item!r}" for item in missing)
    assert not missing, f"the message lacks:\n{listed}\n--- message:\n{message}"
    return message
