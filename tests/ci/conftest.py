"""The CI scripts import each other as top-level modules (``from gha import ...``), as they do when
GitHub runs ``python scripts/ci/<name>.py``; so their directory goes on ``sys.path`` for these tests
(before the test modules are imported). Helpers live in ``ci_helpers.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "ci"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
