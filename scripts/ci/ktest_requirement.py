"""What ``pip install`` gets for ktest in the setup-ktest action: ``ktest_requirement.py``.

Environment: ``KTEST_REQUIREMENT`` (the action's ``ktest-version`` input: empty, a
requirement like ``ktest==0.2.0``, or ``ktest @ git+https://...``), ``KTEST_SOURCE`` (the
action's own checkout, installed when the input is empty) and ``BACKEND``; ``kind`` adds
ktest's ``kind`` extra (the Docker SDK the kind backend talks to the engine with).
"""

from __future__ import annotations

import os
import re
import sys

from gha import CIError, fail

BACKEND_EXTRAS = {"bare": "", "kind": "[kind]"}
_NAMED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?P<extras>\[[^\]]*\])?(?P<rest>.*)$")


def requirement(spec: str, source: str, backend: str) -> str:
    """The pip argument; CIError for a backend or a URL the extra cannot be added to."""
    if backend not in BACKEND_EXTRAS:
        raise CIError(f"backend {backend!r} is not one of: {', '.join(BACKEND_EXTRAS)}")
    extra = BACKEND_EXTRAS[backend]
    spec = spec.strip()
    if not spec:
        if not source:
            raise CIError("KTEST_SOURCE is not set: the action cannot tell where its own ktest is")
        return f"{source}{extra}"
    named = _NAMED.match(spec)
    if named is None or (" @ " not in spec and "://" in spec):
        if extra and "://" in spec:
            raise CIError(
                f"ktest-version {spec!r} is a bare URL, which cannot carry the '{extra}' extra the "
                f"kind backend needs; write it as 'ktest{extra} @ {spec}'"
            )
        return spec + extra if extra and "://" not in spec else spec  # a local path
    if not extra or named.group("extras"):
        return spec  # bare backend, or extras chosen by the user
    return f"{named.group('name')}{extra}{named.group('rest')}"


def main() -> int:
    try:
        print(
            requirement(
                os.environ.get("KTEST_REQUIREMENT", ""),
                os.environ.get("KTEST_SOURCE", ""),
                os.environ.get("BACKEND", "bare") or "bare",
            )
        )
    except CIError as error:
        return fail(error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
