"""ktest: envtest-style integration testing of Kubernetes operators.

The public names are imported lazily, so ``import ktest`` is cheap and has no
side effects (the pytest plugin imports it in every test run).
"""

from __future__ import annotations

from ktest.lazy import lazy_attributes
from ktest.public_api import TOP_LEVEL, VERSION

__version__ = VERSION

_EXPORTS = TOP_LEVEL  # the public API is listed once, in ktest.public_api

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())
