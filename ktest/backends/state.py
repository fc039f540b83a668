"""Where backends record their clusters: one directory per backend under ktest's state home."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def state_directory(name: str, env: Mapping[str, str] | None = None) -> Path:
    """``${XDG_STATE_HOME:-~/.local/state}/ktest/<name>``: where a backend records its clusters."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base).expanduser() / "ktest" / name
