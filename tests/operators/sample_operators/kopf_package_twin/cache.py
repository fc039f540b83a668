"""The twin's own `cache` module."""

from __future__ import annotations

SOURCE = "twin"
