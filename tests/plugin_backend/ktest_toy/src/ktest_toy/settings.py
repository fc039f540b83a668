"""The toy backend's own setting: the banner it says when a session opens it."""

from __future__ import annotations

from ktest.extension import Spec, parse_text, setting

ROWS: tuple[Spec, ...] = (
    setting("toy_banner", parse_text, "what backend toy says when a session opens it", "(none)",
            metavar="TEXT"),
)
