"""``ktest toy``: the toy backend's own verb (prints the banner a session would say)."""

from __future__ import annotations

import argparse
from typing import Any

from ktest.extension import settings_from_env


def register(subparsers: Any, parsers: dict[str, argparse.ArgumentParser]) -> None:
    toy = subparsers.add_parser("toy", help="show the banner backend toy says (setting toy_banner)")
    toy.set_defaults(handler=_toy)


def _toy(args: argparse.Namespace) -> int:
    print(f"toy banner: {settings_from_env().toy_banner or '(none)'}")
    return 0
